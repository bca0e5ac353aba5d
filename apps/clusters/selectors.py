"""Reads of clusters that need more than a queryset."""
import yaml

from .choices import CredentialKind
from .crypto import decrypt
from .models import Cluster, ClusterCredential, Node, PoolQueue


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


class QueuePositions:
    """Queued workloads' queue positions (PoolQueue), each pool's queue read at most once: one query
    per pool asked about, however many workloads are. Keep one per request or message."""

    def __init__(self) -> None:
        self._pools: dict[int, dict[int, int]] = {}

    def of(self, *, pool_id: int | None, workload_id: int) -> int | None:
        """The workload's place in its pool's queue, from 1; None when the last cycle did not order it."""
        if pool_id is None:
            return None
        places = self._pools.get(pool_id)
        if places is None:
            ids = PoolQueue.objects.filter(pool_id=pool_id).values_list("workloads", flat=True).first() or []
            places = self._pools[pool_id] = {pk: i for i, pk in enumerate(ids, start=1)}
        return places.get(workload_id)

    def seed(self, *, pool_id: int, workloads: list[int]) -> None:
        """The pool's queue as already read (a PoolQueue's `workloads`), so that it is not read again."""
        self._pools[pool_id] = {pk: i for i, pk in enumerate(workloads, start=1)}
