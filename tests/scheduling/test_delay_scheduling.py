"""Delay scheduling (policy/locality.py): a workload whose datasets a node of its pool caches is
placed on such a node, or waits a bounded time for one while it fits elsewhere. Property-tested:
with the bound at 0 the decisions are those of the policy without it, and with it on no workload
is held back for its data past its bound, in one cycle or over a whole replay."""
import dataclasses
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.datasim import DatasetCacheModel
from apps.scheduling.policy import (
    Admit,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    QuotaState,
    Resources,
    RunningWorkload,
    Snapshot,
    Wait,
    WaitKind,
    schedule,
)
from apps.scheduling.simulation import SimJob, simulate
from tests.scheduling.test_policy_properties import T0, build, nodes_st, quota_st, work_st

WAIT_60 = PolicyOptions(locality_wait={"p": 60.0})  # delay scheduling on pool p, bounded at 60 s

HOLD = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _with_data(pending, names, data):
    """Each pending workload with some nodes holding its data and, maybe, an earlier hold."""
    out = []
    for w in pending:
        holders = frozenset(data.draw(st.sets(st.sampled_from(names), max_size=3)))
        ago = data.draw(st.one_of(st.none(), st.integers(0, 900)))
        out.append(dataclasses.replace(w, datasets_on=holders,
                                       locality_since=None if ago is None else T0 - timedelta(seconds=ago)))
    return out


@HOLD
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st, st.sampled_from([None, {}, {"p": 0.0}]),
       st.data())
def test_with_the_bound_at_0_the_decisions_are_those_without_delay_scheduling(nodes, quotas, first, second, off,
                                                                               data):
    node_states, quota_states, running, pending = build(nodes, quotas, first, second)
    pending = _with_data(pending, [n.name for n in node_states], data)
    without = schedule(Snapshot(node_states, quota_states, pending, running=running, now=T0))
    with_zero = schedule(Snapshot(node_states, quota_states, pending, running=running, now=T0),
                         PolicyOptions(locality_wait=off))
    assert with_zero == without
    assert not any(isinstance(d, Wait) and d.kind == WaitKind.LOCALITY for d in with_zero)


@HOLD
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st, st.integers(1, 600), st.data())
def test_no_workload_is_held_for_its_data_past_its_bound(nodes, quotas, first, second, bound, data):
    node_states, quota_states, running, pending = build(nodes, quotas, first, second)
    pending = _with_data(pending, [n.name for n in node_states], data)
    decisions = schedule(Snapshot(node_states, quota_states, pending, running=running, now=T0),
                         PolicyOptions(locality_wait={"p": float(bound)}))
    by_id = {w.id: w for w in pending}
    for d in decisions:
        if isinstance(d, Wait) and d.kind == WaitKind.LOCALITY:
            w = by_id[d.workload_id]
            since = w.locality_since or T0
            assert w.datasets_on
            assert T0 - since < timedelta(seconds=bound)  # only within its bound
            assert d.estimated_start == since + timedelta(seconds=bound)  # and it says until when
            assert "waiting for a node holding its data" in d.reason


def _pool(count=3):
    return [NodeState(name=f"n{i}", pool="p", allocatable=Resources(8000, 64000, 256 * 1024)) for i in range(count)]


def _quota():
    return [QuotaState(project="a", pool="p", nominal=Resources(10**6, 10**7, 10**9))]


def _busy(node, gpus=8, wid=90):
    return RunningWorkload(id=wid, project="a", pool="p", priority=3, per_replica=Resources(gpus * 1000, 1000, 1024),
                           placement=({"replica": 0, "node": node, "gpus": list(range(gpus))},))


def _job(**kw):
    base = dict(id=1, project="a", pool="p", priority=3, submitted_at=T0, replicas=1,
                per_replica=Resources(1000, 1000, 1024))
    return PendingWorkload(**{**base, **kw})


def test_a_holder_with_room_is_chosen_over_the_best_fit_node():
    # n0 is partly used (best fit for one GPU), n2 is empty and holds the data: the tie-break alone
    # keeps n0, delay scheduling takes the holder.
    nodes, running = _pool(), [_busy("n0", gpus=6)]
    job = _job(datasets_on=frozenset({"n2"}))
    [plain] = schedule(Snapshot(nodes, _quota(), [job], running=running, now=T0))
    [local] = schedule(Snapshot(nodes, _quota(), [job], running=running, now=T0), WAIT_60)
    assert plain.placement[0]["node"] == "n0"
    assert isinstance(local, Admit) and local.placement[0]["node"] == "n2"


def test_it_waits_for_a_busy_holder_then_takes_any_node_once_the_bound_has_passed():
    nodes, running = _pool(), [_busy("n1")]
    job = _job(datasets_on=frozenset({"n1"}))
    [first] = schedule(Snapshot(nodes, _quota(), [job], running=running, now=T0), WAIT_60)
    assert isinstance(first, Wait) and first.kind == WaitKind.LOCALITY
    assert "waiting for a node holding its data (n1 of pool 'p'" in first.reason
    held = dataclasses.replace(job, locality_since=T0)
    later = T0 + timedelta(seconds=59)
    [still] = schedule(Snapshot(nodes, _quota(), [held], running=running, now=later), WAIT_60)
    assert isinstance(still, Wait) and still.kind == WaitKind.LOCALITY and still.estimated_start == T0 + timedelta(
        seconds=60)
    [after] = schedule(Snapshot(nodes, _quota(), [held], running=running, now=T0 + timedelta(seconds=60)),
                       WAIT_60)
    assert isinstance(after, Admit) and after.placement[0]["node"] != "n1"


def test_no_hold_when_it_fits_nowhere_or_no_holder_could_ever_take_it():
    nodes = _pool(2)
    full = [_busy("n0", wid=90), _busy("n1", wid=91)]
    job = _job(datasets_on=frozenset({"n1"}))
    [blocked] = schedule(Snapshot(nodes, _quota(), [job], running=full, now=T0), dataclasses.replace(WAIT_60, preemption=False))
    assert blocked.kind != WaitKind.LOCALITY  # waiting for data would not start it sooner
    small = [NodeState(name="tiny", pool="p", allocatable=Resources(1000, 64000, 256 * 1024)), *nodes]
    big = _job(per_replica=Resources(4000, 1000, 1024), datasets_on=frozenset({"tiny"}))
    [decision] = schedule(Snapshot(small, _quota(), [big], now=T0), WAIT_60)
    assert isinstance(decision, Admit)  # the only holder is too small for it: no point waiting


def test_other_pools_bounds_do_not_apply():
    nodes, running = _pool(), [_busy("n1")]
    job = _job(datasets_on=frozenset({"n1"}))
    [decision] = schedule(Snapshot(nodes, _quota(), [job], running=running, now=T0),
                          PolicyOptions(locality_wait={"other": 600.0}))
    assert isinstance(decision, Admit)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(5, 900), st.sampled_from([1000, 2000, 500]),
                          st.integers(0, 3)), min_size=1, max_size=25),
       st.integers(1, 300))
def test_over_a_replay_no_job_is_held_past_its_bound(specs, bound):
    nodes = [NodeState(name=f"n{i}", pool="sim", allocatable=Resources(2000, 8000, 32768)) for i in range(3)]
    quotas = [QuotaState(project="p", pool="sim", nominal=Resources(6000, 24000, 98304))]
    jobs = [SimJob(id=i, project="p", arrival=float(a), duration=float(d), per_replica=Resources(g, 1000, 1024))
            for i, (a, d, g, _) in enumerate(specs)]
    model = DatasetCacheModel([j.id for j in jobs], datasets=4, dataset_gb=10, cache_gb=10, wait_seconds=bound)
    model.dataset_of = {i: ds for i, (*_, ds) in enumerate(specs)}
    result = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn", data=model)
    assert result.finished == len(jobs)
    assert all(held <= bound + 0.01 for held in model.held.values())
    assert set(model.held) == set(model.since)  # every job held back started


def test_delay_scheduling_raises_the_hit_rate_of_a_replay():
    """Three datasets land on three nodes in a burst; a long job then keeps one node partly busy, so
    best fit sends every later job there, whose two-slot cache thrashes on the three datasets. With
    delay scheduling each later job goes to the node holding its dataset."""
    nodes = [NodeState(name=f"n{i}", pool="sim", allocatable=Resources(4000, 16000, 65536)) for i in range(3)]
    quotas = [QuotaState(project="p", pool="sim", nominal=Resources(12000, 48000, 196608))]
    burst = [SimJob(id=i, project="p", arrival=0.0, duration=5.0, per_replica=Resources(4000, 1000, 1024))
             for i in range(3)]
    long = [SimJob(id=3, project="p", arrival=1.0, duration=10_000.0, per_replica=Resources(1000, 1000, 1024))]
    later = [SimJob(id=i, project="p", arrival=10.0 + 7 * i, duration=5.0, per_replica=Resources(1000, 1000, 1024))
             for i in range(4, 40)]
    jobs = burst + long + later
    rates = {}
    for wait in (0.0, 30.0):
        model = DatasetCacheModel([j.id for j in jobs], datasets=3, dataset_gb=10, cache_gb=20, wait_seconds=wait)
        model.dataset_of = {j.id: j.id % 3 for j in jobs}
        simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn", data=model)
        assert model.hits + model.misses == len(jobs)
        rates[wait] = model.hit_rate
    assert rates[0.0] < 0.3
    assert rates[30.0] >= (len(jobs) - 3) / len(jobs)  # all but the burst's fills
