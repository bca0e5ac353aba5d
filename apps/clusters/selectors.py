"""Reads of clusters that need more than a queryset."""
import yaml

from .choices import CredentialKind
from .crypto import decrypt
from .models import Cluster, ClusterCredential


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
