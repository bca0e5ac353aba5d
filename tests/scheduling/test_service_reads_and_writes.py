"""The scheduling service on real PostgreSQL reads in full only the queued rows that changed since
its last cycle (their xmin moved: a new submission, an edit by anyone, a status change) and
writes the waits that changed in bulk, skipping rows no longer queued."""
import pytest

from apps.clusters.models import PoolQueue
from apps.clusters.selectors import QueuePositions
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


def position(workload) -> int | None:
    return QueuePositions().of(pool_id=workload.pool_id, workload_id=workload.pk)


@pytest.fixture
def full_pool(project, pool):
    NodeFactory(pool=pool, name="n1", gpu_count=1, cpu_milli_allocatable=8000, memory_mb_allocatable=32000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=64000, nominal_memory_mb=256000)
    WorkloadFactory(project=project, pool=pool, gpu_milli=1000, status="running", preemptible=False,
                    placement=[{"replica": 0, "node": "n1", "gpus": [0]}])
    return pool


def test_a_steady_queue_is_neither_read_again_nor_written(project, full_pool):
    jobs = [WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3) for _ in range(3)]
    first = scheduling_cycle()
    assert first.queued_read == 3 and first.waits_written == 3
    assert set(first.timings) == {"read", "decide", "write", "read_cpu", "decide_cpu", "write_cpu"}
    positions = {w.pk: position(w) for w in jobs}
    assert sorted(positions.values()) == [1, 2, 3]
    again = scheduling_cycle()
    assert again.waiting == 3 and again.queued_read == 0 and again.waits_written == 0


def test_rows_changed_by_anyone_are_read_again_and_their_waits_rewritten(project, full_pool):
    old = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3)
    new = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3)
    scheduling_cycle()
    assert position(old) == 1
    # Another writer raises the newer one's priority without save() (no updated_at): its xmin moves.
    Workload.objects.filter(pk=new.pk).update(priority=0)
    cycle = scheduling_cycle()
    assert cycle.queued_read == 1
    assert position(new) == 1
    assert position(old) == 2
    assert cycle.waits_written == 2
    third = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=5)
    cycle = scheduling_cycle()
    assert cycle.queued_read == 1 and cycle.waiting == 3
    assert position(third) == 3


def test_a_workload_that_left_the_queue_is_dropped_and_not_written(project, full_pool):
    stays = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3)
    leaves = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=0)
    scheduling_cycle()
    Workload.objects.filter(pk=leaves.pk).update(status="stopped", pending_reason="")
    cycle = scheduling_cycle()
    assert cycle.waiting == 1 and cycle.queued_read == 0
    assert position(stays) == 1
    assert Workload.objects.get(pk=leaves.pk).pending_reason == ""


def test_positions_are_one_row_per_pool_written_only_when_the_order_changes(project, full_pool):
    jobs = [WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3) for _ in range(3)]
    scheduling_cycle()
    queue = PoolQueue.objects.get(pool=full_pool)
    assert queue.workloads == [j.pk for j in jobs]  # the order the cycle considered them in
    written = queue.updated_at
    scheduling_cycle()  # the same order: the row is not written again
    assert PoolQueue.objects.get(pool=full_pool).updated_at == written
    urgent = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=0)
    assert position(urgent) is None  # submitted since the last cycle: not ordered yet
    scheduling_cycle()
    assert [position(w) for w in (urgent, *jobs)] == [1, 2, 3, 4]
    assert PoolQueue.objects.get(pool=full_pool).updated_at > written
