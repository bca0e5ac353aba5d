"""The scheduling service on real PostgreSQL reads in full only the queued rows that changed since
its last cycle (their xmin moved: a new submission, an edit by anyone, a status change) and
writes the waits that changed in bulk, skipping rows no longer queued: a wait whose kind or class
changed at once, one whose figures only moved once its text is older than CAIRN_WAIT_REFRESH_SECONDS."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.clusters.models import Node, PoolQueue
from apps.clusters.selectors import QueuePositions
from apps.quotas.models import Quota
from apps.scheduling.services import reason_class, scheduling_cycle
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


# -- wait reasons: their kind and class at once, their figures on a freshness bound ----------------

def refresh_after(settings, seconds: float) -> None:
    settings.CAIRN = {**settings.CAIRN, "WAIT_REFRESH_SECONDS": seconds}


def shrink_free_cpu(node_name: str, cpu_milli: int) -> None:
    """Changes the figure a capacity wait quotes (the most free on one node), not what blocks it."""
    Node.objects.filter(name=node_name).update(cpu_milli_allocatable=cpu_milli)


def test_reason_class_keeps_words_and_names_and_leaves_out_figures():
    a = "capacity: pool 'gpu-2' cannot fit 2 replica(s) of 1 GPU, 4 CPU at once with GPU model a100; " \
        "the most free on one node is 0 GPU, 7.5 CPU, 1e+06 MB memory"
    b = a.replace("7.5 CPU", "3 CPU").replace("1e+06", "250")
    assert reason_class("capacity", a) == reason_class("capacity", b)
    assert "'gpu-2'" in reason_class("capacity", a) and "a100" in reason_class("capacity", a)
    assert reason_class("capacity", a) != reason_class("capacity", a.replace("'gpu-2'", "'gpu-3'"))
    assert reason_class("capacity", a) != reason_class("quota_limit", a)
    assert reason_class("quota_limit", "quota: project 'p' uses 3 GPUs") != reason_class(
        "quota_limit", "quota: project 'p' has 3 GPUs")


def capacity_waits(jobs) -> dict[int, tuple]:
    """The jobs waiting on capacity (the first in line waits on a reservation instead), by id: (reason, written at)."""
    return {w.pk: (w.pending_reason, w.pending_reason_at)
            for w in Workload.objects.filter(pk__in=[j.pk for j in jobs], waiting_on="capacity").order_by("pk")}


def test_a_wait_whose_figures_moved_is_not_rewritten_while_fresh(settings, project, full_pool):
    refresh_after(settings, 300)
    jobs = [WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3) for _ in range(3)]
    first = scheduling_cycle()
    assert first.waits_written == 3
    before = capacity_waits(jobs)
    assert len(before) == 2
    assert all("most free on one node is 0 GPU, 7.5 CPU" in reason and at is not None for reason, at in before.values())
    shrink_free_cpu("n1", 6000)
    again = scheduling_cycle()
    assert again.waiting == 3 and again.waits_written == 0 and again.queued_read == 0
    assert capacity_waits(jobs) == before  # the figures stay as of the first cycle, within the bound
    refresh_after(settings, 0)  # no bound: every change is written, as the figures are now
    now = scheduling_cycle()
    assert now.waits_written == 2 and now.waits_refreshed == 0
    assert all("most free on one node is 0 GPU, 5.5 CPU" in reason for reason, _ in capacity_waits(jobs).values())


def test_a_wait_whose_kind_changed_is_written_at_once(settings, project, full_pool):
    refresh_after(settings, 300)
    job = WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3)
    scheduling_cycle()
    assert Workload.objects.get(pk=job.pk).waiting_on == "reserved"
    # Its project's quota shrinks to nothing it may use: a quota wait now, whatever the bound.
    Quota.objects.filter(project=project, pool=full_pool).update(nominal_gpu_milli=0, borrowing_limit_gpu_milli=0)
    cycle = scheduling_cycle()
    assert cycle.waits_written == 1 and cycle.waits_refreshed == 0
    row = Workload.objects.get(pk=job.pk)
    assert row.waiting_on.startswith("quota") and row.pending_reason.startswith("quota:")


def test_waits_past_the_bound_are_refreshed_oldest_first_a_share_per_cycle(settings, project, full_pool):
    refresh_after(settings, 300)
    jobs = [WorkloadFactory(project=project, pool=full_pool, gpu_milli=1000, priority=3) for _ in range(10)]
    scheduling_cycle()
    scheduling_cycle()  # cycles a moment apart: about 10 waits * moment / 300 s age past the bound per cycle
    shrink_free_cpu("n1", 6000)
    waiting = list(capacity_waits(jobs))
    assert len(waiting) == 9
    written_at = timezone.now() - timedelta(seconds=400)
    for age, pk in enumerate(waiting):  # all past the bound; waiting[-1] the oldest
        Workload.objects.filter(pk=pk).update(pending_reason_at=written_at - timedelta(seconds=age))
    cycle = scheduling_cycle()
    assert cycle.waits_written == cycle.waits_refreshed == 1  # not all nine in one cycle
    shown = capacity_waits(jobs)
    refreshed = [pk for pk in waiting if "5.5 CPU" in shown[pk][0]]
    assert refreshed == [waiting[-1]] and shown[waiting[-1]][1] > written_at
    cycle = scheduling_cycle()
    shown = capacity_waits(jobs)
    assert cycle.waits_refreshed == 1
    assert [pk for pk in waiting if "5.5 CPU" in shown[pk][0]] == [waiting[-2], waiting[-1]]
