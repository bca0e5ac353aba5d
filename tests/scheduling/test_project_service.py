"""Each project's decayed service (GPU-time held, GPU-time in the system) read from PostgreSQL, the
snapshot that carries it to the policy, and the order it gives work past the bounded wait."""
import dataclasses
import math
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.quotas.models import UsageRecord
from apps.scheduling.policy import DEFAULT_SERVICE_HALF_LIFE, Admit, Wait, schedule
from apps.scheduling.services import policy_options, project_service, scheduling_cycle, scheduling_snapshot
from apps.workloads.models import Workload
from tests.factories import NodeFactory, PoolFactory, ProjectFactory, QuotaFactory, WorkloadFactory

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
H = 86400.0  # a one-day half-life
HOUR = timedelta(hours=1)


def integral(gpus: float, start: datetime, end: datetime, *, now: datetime = NOW, half_life: float = H) -> float:
    """∫ gpus * 2 ** (-(now - t) / half_life) dt over [start, end], in closed form."""
    ago_start, ago_end = (now - start).total_seconds(), (now - end).total_seconds()
    return gpus * half_life / math.log(2) * (2 ** (-ago_end / half_life) - 2 ** (-ago_start / half_life))


def held(project, pool, gpu_milli: int, start: datetime, end: datetime | None) -> UsageRecord:
    return UsageRecord.objects.create(project=project, pool=pool, gpu_milli=gpu_milli, started_at=start, ended_at=end)


def workload(project, pool, *, gpu_milli: int, submitted: datetime, status: str = "queued", replicas: int = 1,
             finished: datetime | None = None, changed: datetime | None = None, **fields) -> Workload:
    """A workload submitted at `submitted` (created_at is set on insert: written afterwards)."""
    w = WorkloadFactory(project=project, pool=pool, gpu_milli=gpu_milli, replicas=replicas, status=status, **fields)
    Workload.objects.filter(pk=w.pk).update(created_at=submitted, finished_at=finished,
                                            updated_at=changed or finished or submitted)
    w.refresh_from_db()
    return w


def test_service_is_the_decayed_gpu_time_held_and_in_the_system(project, pool):
    other_pool = PoolFactory(name="other")
    neighbour = ProjectFactory(slug="nlp")
    # Held, by the ledger: a closed interval, an open one (up to now), one that began more than ten
    # half-lives ago but ended within them (all of it counts), one that ended before (not read).
    held(project, pool, 2000, NOW - 3 * HOUR, NOW - HOUR)
    held(project, pool, 1000, NOW - HOUR / 2, None)
    held(project, pool, 4000, NOW - timedelta(seconds=12 * H), NOW - timedelta(seconds=9 * H))
    held(project, pool, 8000, NOW - timedelta(seconds=12 * H), NOW - timedelta(seconds=11 * H))
    held(project, pool, 0, NOW - 5 * HOUR, None)  # no GPU: counts for nothing
    # In the system, from submission to the end: finished; queued (up to now); stopped without a
    # finished_at (up to its last status change); finished more than ten half-lives ago (not read).
    workload(project, pool, gpu_milli=2000, submitted=NOW - 4 * HOUR, status="succeeded", finished=NOW - HOUR)
    workload(project, pool, gpu_milli=1000, replicas=2, submitted=NOW - 2 * HOUR)
    workload(project, pool, gpu_milli=500, status="stopped", submitted=NOW - 6 * HOUR, changed=NOW - 5 * HOUR)
    workload(project, pool, gpu_milli=8000, status="failed", submitted=NOW - timedelta(seconds=12 * H),
             finished=NOW - timedelta(seconds=11 * H))
    workload(project, pool, gpu_milli=0, cpu_milli=4000, submitted=NOW - 8 * HOUR)  # no GPU: counts for nothing
    # Another project on the same pool, running; the same project on another pool, kept apart.
    held(neighbour, pool, 4000, NOW - 10 * HOUR, None)
    workload(neighbour, pool, gpu_milli=4000, status="running", submitted=NOW - 11 * HOUR)
    held(project, other_pool, 1000, NOW - 2 * HOUR, NOW - HOUR)

    service = project_service(now=NOW, half_life=H)

    expected = {
        ("local", "vision"): (
            integral(2, NOW - 3 * HOUR, NOW - HOUR) + integral(1, NOW - HOUR / 2, NOW)
            + integral(4, NOW - timedelta(seconds=12 * H), NOW - timedelta(seconds=9 * H)),
            integral(2, NOW - 4 * HOUR, NOW - HOUR) + integral(2, NOW - 2 * HOUR, NOW)
            + integral(0.5, NOW - 6 * HOUR, NOW - 5 * HOUR),
        ),
        ("local", "nlp"): (integral(4, NOW - 10 * HOUR, NOW), integral(4, NOW - 11 * HOUR, NOW)),
        ("other", "vision"): (integral(1, NOW - 2 * HOUR, NOW - HOUR), 0.0),
    }
    assert service.keys() == expected.keys()
    for key, (used, spent) in expected.items():
        assert service[key] == (pytest.approx(used, rel=1e-6), pytest.approx(spent, rel=1e-6, abs=1e-9)), key
    # The interval older than ten half-lives would have shown (about 2 % of what vision held).
    assert integral(8, NOW - timedelta(seconds=12 * H), NOW - timedelta(seconds=11 * H)) > 0.01 * expected[("local", "vision")][0]


def test_service_forgets_with_the_half_life(project, pool):
    """An hour held a half-life ago counts half as much as an hour held just now."""
    held(project, pool, 1000, NOW - timedelta(seconds=H) - HOUR, NOW - timedelta(seconds=H))
    long_ago = project_service(now=NOW, half_life=H)[("local", "vision")][0]
    UsageRecord.objects.all().delete()
    held(project, pool, 1000, NOW - HOUR, NOW)
    just_now = project_service(now=NOW, half_life=H)[("local", "vision")][0]
    assert long_ago / just_now == pytest.approx(0.5, rel=1e-9)


def test_the_snapshot_carries_the_service_keyed_as_its_pending_work(project, pool, settings):
    # A mixed pool (NVIDIA and Ascend nodes): fold rewrites the workloads' model keys, not the pools.
    NodeFactory(pool=pool, name="gpu", gpu_count=8, gpu_model="H100", accelerator_type="nvidia", cpu_arch="amd64")
    NodeFactory(pool=pool, name="npu", gpu_count=8, gpu_model="910B", accelerator_type="ascend", cpu_arch="arm64")
    QuotaFactory(project=project, pool=pool)
    now = timezone.now()
    waiting = workload(project, pool, gpu_milli=2000, submitted=now - 2 * HOUR, accelerator_type="ascend")
    held(project, pool, 1000, now - 5 * HOUR, now - 3 * HOUR)

    snapshot = scheduling_snapshot(now=now)

    [pending] = snapshot.pending
    assert pending.id == waiting.pk and pending.gpu_model == "ascend/910B/arm64"  # folded
    assert snapshot.project_service == project_service(now=now, half_life=DEFAULT_SERVICE_HALF_LIFE)
    used, spent = snapshot.project_service[(pending.pool, pending.project)]
    assert (pending.pool, pending.project) == ("local", "vision") and 0 < used < spent
    # The half-life comes from the settings (CAIRN_SERVICE_HALF_LIFE_SECONDS).
    settings.CAIRN = {**settings.CAIRN, "SERVICE_HALF_LIFE_SECONDS": 3600.0}
    assert scheduling_snapshot(now=now).project_service == project_service(now=now, half_life=3600.0)


@pytest.mark.parametrize("worse_served", ["later", "earlier"])
def test_past_the_bound_the_worse_served_project_is_admitted_first(pool, settings, worse_served):
    """One free GPU, two projects' 1-GPU jobs both past the bounded wait, same priority and share.
    Without the service the earlier-submitted job goes first; with it, the job of the project whose
    history shows the worse ratio (it queued ten hours and held one) does, whichever was submitted
    first."""
    settings.CAIRN = {**settings.CAIRN, "STARVATION_SECONDS": 60.0}
    NodeFactory(pool=pool, name="n1", gpu_count=1)
    now = timezone.now()
    early, late = ProjectFactory(slug="early"), ProjectFactory(slug="late")
    for p in (early, late):
        QuotaFactory(project=p, pool=pool, nominal_gpu_milli=1000)
    # Yesterday each project had one 1-GPU job in the system for ten hours: the well served one
    # held its GPU nine of them, the badly served one, one.
    worse, better = (late, early) if worse_served == "later" else (early, late)
    for p, hours_held in ((better, 9), (worse, 1)):
        workload(p, pool, gpu_milli=1000, status="succeeded", submitted=now - 30 * HOUR, finished=now - 20 * HOUR)
        held(p, pool, 1000, now - (20 + hours_held) * HOUR, now - 20 * HOUR)
    first = workload(early, pool, gpu_milli=1000, submitted=now - 3 * HOUR, priority=3)
    second = workload(late, pool, gpu_milli=1000, submitted=now - 2 * HOUR, priority=3)
    winner, loser = (second, first) if worse_served == "later" else (first, second)

    # What the order would be without the service: the earlier submitted job.
    snapshot = scheduling_snapshot()
    unserved = {d.workload_id: d for d in schedule(dataclasses.replace(snapshot, project_service=None))}
    assert isinstance(unserved[first.pk], Admit) and isinstance(unserved[second.pk], Wait)

    result = scheduling_cycle()

    assert (result.admitted, result.waiting) == (1, 1)
    winner.refresh_from_db()
    loser.refresh_from_db()
    assert winner.status == "admitted" and loser.status == "queued"


def test_work_open_for_thousands_of_half_lives_counts_its_recent_part(project, pool):
    """Weights far below what a float holds are zero, not an error (PostgreSQL's exp() refuses to
    underflow): a GPU held for 100 days with a one-hour half-life counts as one held for ever."""
    held(project, pool, 1000, NOW - timedelta(days=100), None)
    workload(project, pool, gpu_milli=1000, status="running", submitted=NOW - timedelta(days=100))
    used, spent = project_service(now=NOW, half_life=3600.0)[("local", "vision")]
    assert used == pytest.approx(3600.0 / math.log(2), rel=1e-9) and spent == pytest.approx(used, rel=1e-9)


@pytest.mark.parametrize("timeslice", [4 * 3600.0, 0.0])
def test_the_time_slice_comes_from_the_settings_and_preempts_through_the_service(project, pool, settings, timeslice):
    """A project's whole-node job has waited 2 h, past the bound; the project's own job of the same
    priority has held the only node for 5 h. With a 4-hour slice the service preempts it for the
    waiting one and says why; with CAIRN_TIMESLICE_SECONDS=0 nothing is preempted."""
    settings.CAIRN = {**settings.CAIRN, "STARVATION_SECONDS": 3600.0, "TIMESLICE_SECONDS": timeslice}
    NodeFactory(pool=pool, name="n1", gpu_count=8)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=16000)
    now = timezone.now()
    long = workload(project, pool, gpu_milli=8000, submitted=now - 6 * HOUR, status="running", priority=3,
                    placement=[{"replica": 0, "node": "n1", "gpus": list(range(8))}])
    Workload.objects.filter(pk=long.pk).update(admitted_at=now - 5 * HOUR)
    waiting = workload(project, pool, gpu_milli=8000, submitted=now - 2 * HOUR, priority=3)
    assert policy_options().timeslice_seconds == timeslice

    result = scheduling_cycle()

    long.refresh_from_db()
    if timeslice:
        assert result.preempted == 1
        assert long.status == "stopping" and long.preempted_by_id == waiting.pk and long.stop_cause == "preempted"
        message = long.events.filter(reason="Preempted").get().message
        assert "time slice" in message and "after 4 h of running" in message
    else:
        assert result.preempted == 0 and long.status == "running"
