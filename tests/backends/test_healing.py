"""Faults move work (local backend, real processes, simulated nodes): a gang on a node that turns
unhealthy is stopped as a whole and requeued with the node excluded; restarts back off; the
`evict` straggler policy moves a gang off a rank that turned slow, never off a slow group."""
import pytest
from django.utils import timezone

from apps.backends.local.reconciler import reconcile_once
from apps.backends.services import restart_backoff, workload_dispatch
from apps.clusters.choices import NodeHealth
from apps.clusters.models import Node
from apps.clusters.services import node_cordon
from apps.scheduling.services import scheduling_cycle
from apps.training.services import replica_progress_record
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


def _report_steps(workload, times: dict[int, float], steps: range):
    """What each rank's SDK reports: its step times (here given, as a trace would)."""
    for replica, seconds in times.items():
        replica_progress_record(workload_id=workload.pk, attempt=workload.attempt, replica=replica, step=steps[-1],
                                steps=[(step, seconds * (1 + 0.02 * ((step * 7 + replica) % 3 - 1))) for step in steps])


def test_evict_leaves_a_slow_group_from_the_start_alone_and_evicts_exactly_the_rank_that_turns_4x_slower(
        pool, script):
    """A gang of 4 under `evict`: ranks 2 and 3 are 3.5x slower from the first step (shared GPUs);
    reconciled for 80 steps, the job keeps running. Then rank 3 turns 4x slower again: only its
    node is cordoned and the gang moves."""
    for name in ("node-a", "node-b", "node-c", "node-d", "node-e"):
        NodeFactory(pool=pool, name=name, cpu_milli_allocatable=1000)
    workload = WorkloadFactory(
        pool=pool, kind=Kind.TRAINING, replicas=4, cpu_milli=1000, max_restarts=2, status=S.ADMITTED,
        admitted_at=timezone.now(), placement=[{"replica": i, "node": f"node-{'abcd'[i]}"} for i in range(4)],
        spec={"command": ["python", script("import time; time.sleep(300)")], "env": {}, "straggler_policy": "evict"},
    )
    QuotaFactory(project=workload.project, pool=pool)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    speeds = {0: 0.2, 1: 0.2, 2: 0.7, 3: 0.7}
    for first in range(0, 80, 4):
        _report_steps(workload, speeds, range(first, first + 4))
        reconcile_until(workload, S.RUNNING)
    assert workload.attempt == 1 and workload.status == S.RUNNING
    group = workload.events.get(reason="SlowGroup")
    assert "Replicas 2, 3" in group.message and "node-c, node-d" in group.message
    assert workload.runtime["slow_groups"][0]["ranks"] == [2, 3]
    assert not workload.events.filter(reason="Straggler").exists()
    assert all(node.schedulable for node in Node.objects.all())

    speeds[3] = 0.7 * 4
    for first in range(80, 100, 2):
        _report_steps(workload, speeds, range(first, first + 2))
        reconcile_once()
        workload.refresh_from_db()
        if workload.status != S.RUNNING:
            break
    reconcile_until(workload, S.QUEUED, timeout=60)
    assert workload.status_reason == "SlowNode"
    assert {n.name for n in Node.objects.filter(schedulable=False)} == {"node-d"}  # exactly rank 3's node
    straggler = workload.events.get(reason="Straggler")
    assert "Replica 3 is a straggler (of the slow group 2, 3" in straggler.message
    assert "node-d" in straggler.message


def test_evict_alerts_instead_of_removing_half_a_gang(pool, script):
    for name in ("node-a", "node-b", "node-c", "node-d"):
        NodeFactory(pool=pool, name=name, cpu_milli_allocatable=1000)
    workload = WorkloadFactory(
        pool=pool, kind=Kind.TRAINING, replicas=4, cpu_milli=1000, max_restarts=2, status=S.ADMITTED,
        admitted_at=timezone.now(), placement=[{"replica": i, "node": f"node-{'abcd'[i]}"} for i in range(4)],
        spec={"command": ["python", script("import time; time.sleep(300)")], "env": {}, "straggler_policy": "evict"},
    )
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    speeds = {r: 0.2 for r in range(4)}
    for first in range(0, 60, 6):
        _report_steps(workload, speeds, range(first, first + 6))
        reconcile_until(workload, S.RUNNING)
    speeds[1] = speeds[2] = 0.8  # two of four turn 4x slower at once
    for first in range(60, 80, 2):
        _report_steps(workload, speeds, range(first, first + 2))
        reconcile_until(workload, S.RUNNING)
    assert workload.attempt == 1 and workload.status == S.RUNNING
    events = list(workload.events.filter(reason="Straggler").values_list("message", flat=True))
    assert len(events) == 2 and all("Not evicted: 2 ranks (1, 2) would be evicted at once" in m for m in events)
    assert "at most 1 of 4" in events[0]
    assert all(node.schedulable for node in Node.objects.all())
