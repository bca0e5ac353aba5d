"""One active reconciler per cluster (apps/backends/kubernetes/leader.py), on the real control
plane with Cairn's own identity (rbac.yaml's Role cairn-leader-election): reconcilers started at
once, exactly one holds the Lease and acts, the others stand by with warm caches; the leader
stopped cleanly hands over at once (it releases the Lease), the leader killed (no release) hands
over within the lease time."""
import itertools
import time

import pytest
from kubernetes import client as k8s

from apps.backends.kubernetes.reconciler import KubernetesReconciler
from apps.workloads.models import Workload

from .conftest import REAL_TIMEOUTS, eventually

LEASE, RETRY = 4.0, 0.5
_leases = itertools.count(1)


@pytest.fixture
def lease(settings, real_settings):
    """Short lease times, and a Lease of this test's own (an earlier test's may still be held)."""
    name = f"cairn-reconciler-test-{next(_leases)}"
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "LEASE_NAME": name, "LEASE_SECONDS": LEASE,
                                 "RENEW_DEADLINE_SECONDS": 3.0, "LEASE_RETRY_SECONDS": RETRY}
    return name


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def holder(real_kube, name: str) -> str | None:
    try:
        return k8s.CoordinationV1Api(real_kube.api).read_namespaced_lease(name, "cairn-system").spec.holder_identity
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_of_reconcilers_started_at_once_one_acts_and_a_stopped_one_hands_over(
        real_kube, real_cluster, make_real_workload, lease):
    processes = {name: KubernetesReconciler(identity=name, watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"])
                 for name in ("a", "b", "c")}
    try:
        for process in processes.values():
            process.refresh()  # its informers and its elector start
        cluster = {name: p.clusters[real_cluster.pk] for name, p in processes.items()}
        assert eventually(lambda: all(r.synced for r in cluster.values()), timeout=30), "informers never synced"
        assert eventually(lambda: any(r.is_leader() for r in cluster.values()), timeout=10), "nobody leads"
        # Exactly one leads, and keeps leading (it renews; the others see the Lease held).
        for _ in range(10):
            assert sum(r.is_leader() for r in cluster.values()) == 1
            time.sleep(RETRY / 2)
        [leader] = [name for name, r in cluster.items() if r.is_leader()]
        assert holder(real_kube, lease) == leader

        # Only the leader acts: an admitted workload (its dispatch lost) is dispatched by it alone.
        workload = make_real_workload()

        def every_process_steps():
            for process in processes.values():
                process.pass_once()

        assert eventually(lambda: status_of(workload).status == "running", step=every_process_steps, timeout=20)
        for name, r in cluster.items():
            if name == leader:
                assert r.stats["passes"] > 0 and r.stats["workloads"] > 0
            else:
                assert r.stats == {"passes": 0, "full_passes": 0, "workloads": 0, "nodes_synced": 0,
                                   "rows_scanned": 0}, name

        # Stopped cleanly (SIGTERM, a redeploy): the Lease is released, another takes it at its next try.
        stopped = time.monotonic()
        processes.pop(leader).stop()
        cluster.pop(leader)
        assert eventually(lambda: any(r.is_leader() for r in cluster.values()), timeout=LEASE + 5)
        handover = time.monotonic() - stopped
        assert handover < LEASE, f"handover after a release took {handover:.1f}s"
        [second] = [name for name, r in cluster.items() if r.is_leader()]
        assert holder(real_kube, lease) == second

        # Killed (no release): the last one takes over once the Lease was not renewed for its duration.
        killed = time.monotonic()
        processes.pop(second).stop(release=False)
        cluster.pop(second)
        [(last, survivor)] = cluster.items()
        assert eventually(survivor.is_leader, timeout=LEASE + 10), "the standby never took over"
        handover = time.monotonic() - killed
        assert LEASE - 1 <= handover <= LEASE + 4 * RETRY + 2, f"handover after a crash took {handover:.1f}s"
        assert holder(real_kube, lease) == last

        # The new leader looks at everything first (a full pass), then acts: the job ends.
        namespace = f"cairn-{workload.project.slug}"
        [pod] = real_kube.pods(namespace, f"cairn.dev/workload={workload.pk}")
        real_kube.exit(namespace, pod.metadata.name, 0)
        assert eventually(lambda: status_of(workload).status == "succeeded", step=processes[last].pass_once,
                          timeout=30), real_kube.describe(namespace)
        assert survivor.stats["full_passes"] >= 1
    finally:
        for process in processes.values():
            process.stop()
