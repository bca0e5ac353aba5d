"""Preemption end to end on the local backend: SIGTERM, grace period, requeue with the attempt count."""
import textwrap

import pytest

from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.backends.tasks import workload_stop_task
from apps.clusters.selectors import QueuePositions
from apps.core.models import OutboxMessage
from apps.scheduling.services import scheduling_cycle
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.services import workload_stop
from tests.backends.helpers import CHECKPOINT_ON_SIGTERM, gone, kill_processes_mentioning, reconcile_until, replica_processes, wait_for
from tests.factories import NodeFactory, ProjectFactory, QuotaFactory, WorkloadFactory

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _short_grace(settings):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 5.0}
    yield
    kill_processes_mentioning(str(settings.CAIRN_DATA_DIR))


@pytest.fixture
def cluster(pool, shared_dir):
    NodeFactory(pool=pool, name="node-a", gpu_count=4, cpu_milli_allocatable=16000, memory_mb_allocatable=65536)
    a = ProjectFactory(slug="team-a")
    b = ProjectFactory(slug="team-b")
    QuotaFactory(project=a, pool=pool, nominal_gpu_milli=2000)
    QuotaFactory(project=b, pool=pool, nominal_gpu_milli=2000)
    script = shared_dir / "train.py"  # replicas are sandboxed: they see only allowed folders
    script.write_text(textwrap.dedent(CHECKPOINT_ON_SIGTERM))
    return a, b, pool, str(script)


def _job(project, pool, script, name, **fields):
    return WorkloadFactory(project=project, pool=pool, name=name, gpu_milli=2000, cpu_milli=500, memory_mb=256,
                           spec={"command": ["python", script], "env": {}}, **fields)


def _run(workload):
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    wait_for(lambda: "ready" in workload_log_read(workload=workload), what="ready in the log")


def test_borrow_then_reclaim_preempts_only_the_borrowed_work_and_admits_within_one_cycle(cluster):
    a, b, pool, script = cluster
    own = _job(a, pool, script, "own")
    borrowed = _job(a, pool, script, "borrowed")
    assert scheduling_cycle().admitted == 2  # team-b is idle: team-a borrows its 2 GPUs
    own.refresh_from_db()
    borrowed.refresh_from_db()
    _run(own)
    _run(borrowed)
    processes = replica_processes(borrowed)

    reclaimer = _job(b, pool, script, "reclaim")
    result = scheduling_cycle()
    assert (result.admitted, result.preempted) == (0, 1)
    own.refresh_from_db()
    borrowed.refresh_from_db()
    reclaimer.refresh_from_db()
    assert own.status == S.RUNNING  # within team-a's nominal: untouched
    assert borrowed.status == S.STOPPING and borrowed.status_reason == "Preempted"
    assert reclaimer.status == S.QUEUED and reclaimer.pending_reason.startswith("preempting: waiting for 1")
    assert OutboxMessage.objects.filter(topic="workload.stop", payload={"workload_id": borrowed.pk}).exists()
    # The victim still holds its GPUs while it checkpoints: nothing else is admitted meanwhile.
    second = scheduling_cycle()
    assert (second.admitted, second.preempted) == (0, 0), second

    workload_stop_task.run(workload_id=borrowed.pk)  # what the outbox delivers: SIGTERM
    reconcile_until(borrowed, S.QUEUED, timeout=20)
    assert "checkpoint saved" in workload_log_read(workload=borrowed)
    assert wait_for(lambda: gone(processes), what="the victim's processes to exit")
    assert (borrowed.attempt, borrowed.preemptions, borrowed.placement) == (1, 1, [])
    assert borrowed.status_reason == "Requeued"
    assert list(borrowed.events.values_list("reason", flat=True))[-2:] == ["Preempted", "Requeued"]

    result = scheduling_cycle()  # the first cycle after the grace period
    assert result.admitted == 1, list(Workload.objects.values_list("name", "status", "status_reason", "status_message"))
    reclaimer.refresh_from_db()
    borrowed.refresh_from_db()
    assert reclaimer.status == S.ADMITTED
    assert borrowed.status == S.QUEUED and borrowed.pending_reason


def test_higher_priority_preempts_lower_priority_of_its_project(cluster):
    a, _, pool, script = cluster
    low = WorkloadFactory(project=a, pool=pool, name="low", status=S.RUNNING, gpu_milli=2000, priority=5,
                          placement=[{"replica": 0, "node": "node-a", "gpus": [0, 1]}])
    keep = WorkloadFactory(project=a, pool=pool, name="keep", status=S.RUNNING, gpu_milli=2000, priority=5,
                           preemptible=False, placement=[{"replica": 0, "node": "node-a", "gpus": [2, 3]}])
    urgent = _job(a, pool, script, "urgent", priority=0)
    assert scheduling_cycle().preempted == 1
    low.refresh_from_db()
    keep.refresh_from_db()
    urgent.refresh_from_db()
    assert low.status == S.STOPPING and low.preempted_by_id == urgent.pk and low.stop_cause == "preempted"
    assert keep.status == S.RUNNING
    assert urgent.estimated_start is not None and QueuePositions().of(pool_id=urgent.pool_id, workload_id=urgent.pk) == 1


def test_a_stop_during_preemption_ends_stopped_not_requeued(cluster):
    a, _, pool, script = cluster
    low = WorkloadFactory(project=a, pool=pool, name="low", status=S.RUNNING, gpu_milli=4000, priority=5,
                          placement=[{"replica": 0, "node": "node-a", "gpus": [0, 1, 2, 3]}])
    _job(a, pool, script, "urgent", priority=0)
    scheduling_cycle()
    low.refresh_from_db()
    assert low.status == S.STOPPING
    workload_stop(workload=low)
    reconcile_until(low, {S.STOPPED, S.QUEUED}, timeout=10)
    assert low.status == S.STOPPED
