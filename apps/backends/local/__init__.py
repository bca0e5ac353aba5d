"""The local backend: every replica is a process on this machine (docs/local-backend.md).

backend.py     the Backend: launch under shim.py, observe by pid and exit file, signal, logs
reconciler.py  the pass over local workloads (apps.backends.services does the shared steps)
"""
from apps.clusters.backends import BackendSpec

SPEC = BackendSpec(
    name="local", label="Local processes",
    replica_scaling=True,
    shared_accelerators=lambda cluster, kind: True,  # replicas share a device by CUDA_VISIBLE_DEVICES
    runs_on_this_machine=True,
    node_telemetry="this_machine",
)
BACKEND = "apps.backends.local.backend.LocalBackend"
RECONCILER = "apps.backends.loops.run_reconciler_loop"
RECONCILE_ONCE = "apps.backends.loops.reconcile_local_once"
