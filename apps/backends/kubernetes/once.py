"""`run_reconciler --once --backend kubernetes`: list everything once (no watch) and run one pass
over every Kubernetes cluster whose Lease it can take.

A one-shot pass is a reconciler like any other: it must not act beside the one that leads the
cluster (leader.py). With leader election on (LEADER_ELECTION, the default) it tries to take each
cluster's Lease once: a cluster whose Lease another reconciler holds is skipped with a warning
naming the holder (a holder that died is taken over by the running reconcilers after the lease
time, or by `--once` run again then); a Lease it took is released when it is done, so a standby
takes over at once.
"""
import logging
import time

from .reconciler import ClusterReconciler, KubernetesReconciler

logger = logging.getLogger(__name__)


def reconcile_once(**options) -> int:
    """One pass over every cluster this process may lead now. Returns how many workloads it acted
    on. `options`: KubernetesReconciler's (identity, leader_election, cluster options)."""
    reconciler = KubernetesReconciler(**options)
    try:
        reconciler.refresh()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(r.synced for r in reconciler.clusters.values()):
            time.sleep(0.05)
        return sum(r.reconcile_pass() for r in reconciler.clusters.values() if _leads(r))
    finally:
        reconciler.stop()  # releases the Leases it took


def _leads(cluster: ClusterReconciler) -> bool:
    """Whether this process leads the cluster: no election, or the Lease taken now."""
    elector = cluster.elector
    if elector is None:
        return True
    if not elector.is_leader:
        elector.try_acquire_or_renew()  # (its thread tries too: of two writers one wins)
    if elector.is_leader:
        return True
    if elector.holder:
        logger.warning("kubernetes reconciler --once: cluster %s skipped: its Lease %s/%s is held by %s (another "
                       "reconciler leads it; if that one is gone, run again after the lease time, %gs)",
                       cluster.cluster_name, elector.namespace, elector.name, elector.holder, elector.lease_seconds)
    else:
        logger.warning("kubernetes reconciler --once: cluster %s skipped: its Lease %s/%s could not be taken (see "
                       "the leader election warning)", cluster.cluster_name, elector.namespace, elector.name)
    return False
