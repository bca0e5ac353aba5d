"""The Kubernetes backend. The only package in Cairn that imports `kubernetes`.

manifests.py  pure builders: a workload (as plain data) -> the objects Cairn creates
status.py     pure mapping: pods, jobs, nodes as the API returns them -> Cairn's view
client.py     API clients from a cluster's stored credentials; retries with backoff
backend.py    the Backend: launch (idempotent create / adopt), signal (stop), observe, logs
informer.py   list + watch caches with resourceVersion bookkeeping, re-list on 410
reconciler.py the level-triggered pass: workloads and node inventory from the caches
once.py       `run_reconciler --once`: one listing and one pass, no watch

SPEC below is what the apps under the backends may know of it (apps/clusters/backends.py).
"""
from apps.clusters.accelerators import VENDORS
from apps.clusters.backends import BackendSpec


def _shares_accelerators(cluster, kind: str) -> bool:
    """A fraction of a device needs a sharing plugin (config.accelerators.<kind>.shared_resources)."""
    shared = ((cluster.config or {}).get("accelerators") or {}).get(kind, {}).get("shared_resources")
    if shared is None:
        shared = VENDORS[kind].shared_resources if kind in VENDORS else None
    return bool(shared)


def _credential_probe(connection: dict, *, timeout: float) -> dict:
    from .client import check_connectivity  # on first use: the `kubernetes` client is optional

    return check_connectivity(connection, timeout=timeout)


def _notebook_upstream(workload, token: str):
    from .proxy import notebook_upstream  # a notebook is reached through its Service

    return notebook_upstream(workload, token)


SPEC = BackendSpec(
    name="kubernetes", label="Kubernetes",
    rollout_progress=True,
    container_workdir=True,
    shared_accelerators=_shares_accelerators,
    node_telemetry="exporter",
    credential_probe=_credential_probe,
    notebook_upstream=_notebook_upstream,
)
BACKEND = "apps.backends.kubernetes.backend.KubernetesBackend"
RECONCILER = "apps.backends.kubernetes.reconciler.run_kubernetes_reconciler"
RECONCILE_ONCE = "apps.backends.kubernetes.once.reconcile_once"
