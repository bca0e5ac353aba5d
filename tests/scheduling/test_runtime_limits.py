"""Run-time limits through the real scheduling service: they are what the policy's estimated starts
(reservations) and GPU-hour budget checks are computed from."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.quotas.models import UsageRecord
from apps.quotas.selectors import budget_period_start
from apps.scheduling.services import scheduling_cycle, scheduling_snapshot
from apps.workloads.models import Workload
from tests.factories import NodeFactory, ProjectFactory, QuotaFactory, WorkloadFactory

HOUR = 3600


@pytest.fixture
def full_pool(project, pool):
    """A 4-GPU node filled by a neighbour's two 2-GPU jobs with limits: `started` launched 30 min
    ago with a 2 h limit (ends in 1.5 h), `admitted` admitted 10 min ago with a 1 h limit and not
    launched yet (ends 50 min from now at the latest)."""
    NodeFactory(pool=pool, name="n1", gpu_count=4, cpu_milli_allocatable=32000, memory_mb_allocatable=128000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=4000, nominal_cpu_milli=32000,
                 nominal_memory_mb=128000)
    neighbour = ProjectFactory(slug="neighbour")
    QuotaFactory(project=neighbour, pool=pool, nominal_gpu_milli=4000, nominal_cpu_milli=32000,
                 nominal_memory_mb=128000)
    now = timezone.now()
    started = WorkloadFactory(
        project=neighbour, pool=pool, status="running", gpu_milli=2000, max_runtime_seconds=2 * HOUR,
        admitted_at=now - timedelta(minutes=31), started_at=now - timedelta(minutes=30),
        placement=[{"replica": 0, "node": "n1", "gpus": [0, 1]}],
    )
    admitted = WorkloadFactory(
        project=neighbour, pool=pool, status="admitted", gpu_milli=2000, max_runtime_seconds=HOUR,
        admitted_at=now - timedelta(minutes=10), placement=[{"replica": 0, "node": "n1", "gpus": [2, 3]}],
    )
    return started, admitted


def test_a_blocked_job_is_reserved_and_starts_when_the_last_limit_it_waits_for_ends(project, pool, full_pool):
    started, _ = full_pool
    big = WorkloadFactory(project=project, pool=pool, gpu_milli=4000)
    scheduling_cycle()
    big.refresh_from_db()
    assert big.status == "queued"
    assert big.pending_reason.startswith("reserved: pool 'local' is full")
    assert "as 2 running workload(s) end" in big.pending_reason
    # Both neighbours must end; the later is the one launched 30 min ago with its 2 h limit.
    assert big.estimated_start == started.started_at + timedelta(hours=2)


def test_a_job_admitted_but_not_launched_yet_is_expected_to_end_a_limit_after_its_admission(
        project, pool, full_pool):
    _, admitted = full_pool
    small = WorkloadFactory(project=project, pool=pool, gpu_milli=2000)
    scheduling_cycle()
    small.refresh_from_db()
    assert small.pending_reason.startswith("reserved: ") and "as 1 running workload(s) end" in small.pending_reason
    assert small.estimated_start == admitted.admitted_at + timedelta(hours=1)


def test_a_requeued_and_readmitted_job_is_timed_from_its_new_admission_not_its_old_start(project, pool, full_pool):
    started, admitted = full_pool
    # `admitted` ran before (started 5 h ago), was preempted, requeued and admitted again 10 min ago.
    Workload.objects.filter(pk=admitted.pk).update(started_at=admitted.admitted_at - timedelta(hours=5))
    ends = {r.id: r.expected_end for r in scheduling_snapshot().running}
    assert ends == {started.pk: started.started_at + timedelta(hours=2),
                    admitted.pk: admitted.admitted_at + timedelta(hours=1)}


def test_without_limits_the_estimated_start_stays_unknown(project, pool, full_pool):
    Workload.objects.filter(project__slug="neighbour").update(max_runtime_seconds=None)
    big = WorkloadFactory(project=project, pool=pool, gpu_milli=4000)
    scheduling_cycle()
    big.refresh_from_db()
    assert big.pending_reason.startswith("reserved: ") and big.estimated_start is None


def test_a_stopping_job_is_expected_to_end_after_the_grace_period_whatever_its_limit(project, pool, full_pool,
                                                                                     settings):
    started, _ = full_pool
    stop = timezone.now() - timedelta(seconds=1)
    Workload.objects.filter(pk=started.pk).update(status="stopping", stop_requested_at=stop)
    ends = {r.id: r.expected_end for r in scheduling_snapshot().running}
    assert ends[started.pk] == stop + timedelta(seconds=settings.CAIRN["STOP_GRACE_SECONDS"])


@pytest.fixture
def ten_gpu_hours_left(project, pool):
    """8 free GPUs; a 12 GPU-hour monthly budget of which 2 are used (4 GPUs for 30 min)."""
    NodeFactory(pool=pool, name="n1", gpu_count=8, cpu_milli_allocatable=64000, memory_mb_allocatable=256000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=64000,
                 nominal_memory_mb=256000, gpu_hour_budget=12, budget_period="month")
    since = budget_period_start("month", timezone.now())
    UsageRecord.objects.create(project=project, pool=pool, gpu_milli=4000, started_at=since,
                               ended_at=since + timedelta(minutes=30))


def test_a_job_whose_limit_would_overrun_the_budget_waits_while_one_that_fits_is_admitted(
        project, pool, ten_gpu_hours_left):
    # The older (first in line) asks for 4 GPUs x 3 h = 12 GPU-hours; the newer for 4 x 2 h = 8.
    three_hours = WorkloadFactory(project=project, pool=pool, gpu_milli=4000, max_runtime_seconds=3 * HOUR)
    two_hours = WorkloadFactory(project=project, pool=pool, gpu_milli=4000, max_runtime_seconds=2 * HOUR)
    result = scheduling_cycle()
    three_hours.refresh_from_db()
    two_hours.refresh_from_db()
    assert result.admitted == 1
    assert two_hours.status == "admitted"
    assert three_hours.status == "queued"
    assert three_hours.pending_reason == (
        "budget: project 'vision' has 10 of its 12 GPU-hours left this month on pool 'local'; "
        "this workload needs up to 12")


def test_the_budget_is_charged_for_admitted_limits_within_one_cycle(project, pool, ten_gpu_hours_left):
    # Three 2-GPU x 2 h jobs fit the node (6 of 8 GPUs), but only two fit the 10 GPU-hours (8).
    first, second, third = (WorkloadFactory(project=project, pool=pool, gpu_milli=1000, replicas=2,
                                            max_runtime_seconds=2 * HOUR) for _ in range(3))
    scheduling_cycle()
    statuses = {w.pk: w.status for w in Workload.objects.all()}
    assert statuses == {first.pk: "admitted", second.pk: "admitted", third.pk: "queued"}
    third.refresh_from_db()
    assert third.pending_reason == ("budget: project 'vision' has 2 of its 12 GPU-hours left this month on pool "
                                    "'local'; this workload needs up to 4")


def test_a_job_without_a_limit_is_only_held_back_once_the_budget_is_used_up(project, pool, ten_gpu_hours_left):
    unlimited = WorkloadFactory(project=project, pool=pool, gpu_milli=8000)
    scheduling_cycle()
    unlimited.refresh_from_db()
    assert unlimited.status == "admitted"  # its run time is unknown: nothing to charge in advance
