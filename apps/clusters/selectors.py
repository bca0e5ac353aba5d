"""Reads of clusters that need more than a queryset."""
import yaml

from .choices import CredentialKind
from .crypto import decrypt
from .models import Cluster, ClusterCredential, Node


def cluster_connection(*, cluster: Cluster) -> dict:
    """How to reach the cluster: {"in_cluster": True} or {"kubeconfig": dict, "context": str}.

    Raises ClusterCredential.DoesNotExist when none is registered, CredentialsUnreadable when the
    stored kubeconfig cannot be decrypted.
    """
    credential = ClusterCredential.objects.get(cluster=cluster)
    if credential.source == CredentialKind.IN_CLUSTER:
        return {"in_cluster": True, "version": credential.updated_at.isoformat()}
    return {
        "kubeconfig": yaml.safe_load(decrypt(credential.encrypted_kubeconfig)),
        "context": credential.context or None,
        "version": credential.updated_at.isoformat(),
    }


def pool_accelerators(*, pools) -> dict[int, dict[str, list[str]]]:
    """Per pool id: its accelerator types and CPU architectures, as the admin declared them or else
    as its nodes have them (one query for all the pools)."""
    pools = list(pools)
    seen: dict[int, tuple[set[str], set[str]]] = {p.pk: (set(), set()) for p in pools}
    rows = Node.objects.filter(pool__in=[p.pk for p in pools]).values_list("pool_id", "accelerator_type", "cpu_arch")
    for pool_id, kind, arch in rows.distinct():
        if kind:
            seen[pool_id][0].add(kind)
        if arch:
            seen[pool_id][1].add(arch)
    return {p.pk: {"types": list(p.accelerator_types or sorted(seen[p.pk][0] - {"none"} or seen[p.pk][0])),
                   "architectures": list(p.architectures or sorted(seen[p.pk][1]))} for p in pools}
