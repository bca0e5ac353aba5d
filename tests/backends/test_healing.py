"""Faults move work (local backend, real processes, simulated nodes): a gang on a node that turns
unhealthy is stopped as a whole and requeued with the node excluded; restarts back off."""
import pytest
from django.utils import timezone

from apps.backends.services import restart_backoff, workload_dispatch
from apps.clusters.choices import NodeHealth
from apps.clusters.services import node_cordon
from apps.scheduling.services import scheduling_cycle
from apps.workloads.choices import Kind, WorkloadStatus
from tests.backends.helpers import gone, reconcile_until, replica_processes
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _quick(settings):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 1.0, "RESTART_BACKOFF_SECONDS": 0.1}


def test_a_gang_on_a_node_that_turns_unhealthy_is_stopped_and_placed_elsewhere(pool, script):
    nodes = {name: NodeFactory(pool=pool, name=name, cpu_milli_allocatable=1000) for name in ("node-a", "node-b",
                                                                                               "node-c")}
    workload = WorkloadFactory(
        pool=pool, kind=Kind.TRAINING, replicas=2, cpu_milli=1000, max_restarts=1, status=S.ADMITTED,
        admitted_at=timezone.now(), placement=[{"replica": 0, "node": "node-a"}, {"replica": 1, "node": "node-b"}],
        spec={"command": ["python", script("import time; print('up', flush=True); time.sleep(120)")], "env": {}},
    )
    QuotaFactory(project=workload.project, pool=pool)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    first = replica_processes(workload)
    assert first
    node_cordon(node=nodes["node-b"], reason="XID 79", health=NodeHealth.UNHEALTHY,
                message="GPU fell off the bus (XID 79).")

    reconcile_until(workload, S.QUEUED, timeout=60)
    assert gone(first)  # every rank of the attempt stopped before anything else starts
    assert workload.status_reason == "NodeUnhealthy"
    assert "Node node-b is unhealthy (XID 79)" in workload.status_message
    assert "resumes from the last checkpoint on another node" in workload.status_message
    assert workload.placement == []

    scheduling_cycle()
    workload.refresh_from_db()
    assert workload.status == S.ADMITTED
    assert sorted(p["node"] for p in workload.placement) == ["node-a", "node-c"]
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert (workload.status, workload.attempt) == (S.RUNNING, 2)


def test_a_fault_with_no_restarts_left_fails_the_job(pool, script):
    node = NodeFactory(pool=pool, name="node-a")
    workload = WorkloadFactory(
        pool=pool, kind=Kind.TRAINING, replicas=1, max_restarts=0, status=S.ADMITTED, admitted_at=timezone.now(),
        placement=[{"replica": 0, "node": "node-a"}],
        spec={"command": ["python", script("import time; time.sleep(120)")], "env": {}},
    )
    workload_dispatch(workload_id=workload.pk)
    node_cordon(node=node, reason="HeartbeatLost", health=NodeHealth.UNHEALTHY, message="No heartbeat.")
    reconcile_until(workload, S.FAILED, timeout=60)
    assert workload.status_reason == "NodeUnhealthy" and "No restarts left" not in workload.status_message


def test_restart_backoff_doubles_up_to_its_cap(settings):
    settings.CAIRN = {**settings.CAIRN, "RESTART_BACKOFF_SECONDS": 2.0, "RESTART_BACKOFF_MAX_SECONDS": 10.0}
    assert [restart_backoff(n) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 10.0]
