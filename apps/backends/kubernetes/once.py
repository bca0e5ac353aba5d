"""`run_reconciler --once --backend kubernetes`: list everything once (no watch) and run one pass
over every Kubernetes cluster."""
import time

from .reconciler import KubernetesReconciler


def reconcile_once() -> int:
    reconciler = KubernetesReconciler()
    try:
        reconciler.refresh()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(r.synced for r in reconciler.clusters.values()):
            time.sleep(0.05)
        return sum(r.reconcile_pass() for r in reconciler.clusters.values())
    finally:
        reconciler.stop()
