"""The GPU-hour ledger across preempt / requeue / re-admit cycles: every admitted second is charged
once, from each admission to the release of the resources, whatever the attempt count does."""
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.quotas.models import UsageRecord
from apps.quotas.selectors import quota_usage, usage_gpu_seconds
from apps.quotas.services import usage_close, usage_open
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload
from apps.workloads.services import workload_preempt, workload_transition
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


class Clock:
    """A controllable `timezone.now`, so charged seconds can be checked exactly."""

    def __init__(self):
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(timezone, "now", c)
    return c


@pytest.fixture
def job(project, pool):
    NodeFactory(pool=pool, name="n1", gpu_count=4)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=4000, nominal_cpu_milli=16000,
                 nominal_memory_mb=65536)
    return WorkloadFactory(project=project, pool=pool, gpu_milli=1000, replicas=2)  # 2 GPUs


def _admit(workload) -> None:
    assert scheduling_cycle().admitted == 1
    assert Workload.objects.get(pk=workload.pk).status == "admitted"


def _launch(workload) -> None:  # what the backend's dispatch writes
    attempt = Workload.objects.get(pk=workload.pk).attempt + 1
    assert workload_transition(workload_id=workload.pk, from_statuses={"admitted"}, to_status="running",
                               reason="Started", attempt=attempt) is not None


def _preempt_and_requeue(workload, clock, exit_after: float) -> None:
    assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message="Preempted.") is not None
    clock.advance(exit_after)  # the grace period: it still holds its GPUs
    # What the reconciler writes once the replicas have exited.
    assert workload_transition(workload_id=workload.pk, from_statuses={"stopping"}, to_status="queued",
                               reason="Requeued", stop_cause="", placement=[]) is not None


def test_two_preemptions_charge_every_admitted_second_exactly_once(job, clock):
    clock.advance(100)
    _admit(job)                            # charged from t=100
    clock.advance(30)
    _launch(job)                           # attempt 1
    clock.advance(3600)
    _preempt_and_requeue(job, clock, 20)   # released at t=3750: 3,650 s
    clock.advance(500)                     # queued: not charged
    _admit(job)                            # t=4250
    clock.advance(60)
    _preempt_and_requeue(job, clock, 10)   # preempted before its next launch; released at 4320: 70 s
    clock.advance(200)
    _admit(job)                            # t=4520, still attempt 1
    clock.advance(40)
    _launch(job)                           # attempt 2
    clock.advance(1000)
    assert workload_transition(workload_id=job.pk, from_statuses={"running"}, to_status="succeeded",
                               reason="Succeeded") is not None  # t=5560: 1,040 s

    expected = 2 * (3650 + 70 + 1040)  # 2 GPUs x admitted seconds
    clock.advance(7200)  # long after: nothing more is charged
    assert usage_gpu_seconds(project_id=job.project_id, pool_id=job.pool_id, since=T0, now=clock()) == expected
    rows = list(UsageRecord.objects.filter(workload=job).order_by("started_at").values_list(
        "started_at", "ended_at", "attempt", "gpu_milli"))
    seconds = [((start - T0).total_seconds(), (end - T0).total_seconds(), attempt, gpu) for start, end, attempt, gpu
               in rows]
    assert seconds == [(100, 3750, 0, 2000), (4250, 4320, 1, 2000), (4520, 5560, 1, 2000)]
    [quota] = job.project.quotas.all()
    assert quota_usage(quotas=[quota], now=clock())[quota.pk]["gpu_hours_this_period"] == round(expected / 3600, 3)


def test_an_open_interval_is_charged_up_to_now_and_opening_it_again_changes_nothing(job, clock):
    _admit(job)
    clock.advance(90)
    opened = UsageRecord.objects.get(workload=job, ended_at__isnull=True)
    assert usage_open(workload=Workload.objects.get(pk=job.pk)) == opened  # idempotent: no second interval
    assert UsageRecord.objects.filter(workload=job).count() == 1
    assert usage_gpu_seconds(project_id=job.project_id, pool_id=job.pool_id, since=T0, now=clock()) == 180
    assert usage_close(workload=job) == 1
    assert usage_close(workload=job) == 0
    clock.advance(90)
    assert usage_gpu_seconds(project_id=job.project_id, pool_id=job.pool_id, since=T0, now=clock()) == 180
