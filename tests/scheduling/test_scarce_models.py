"""Scarce GPU models: work limited to a model few nodes have, past the bounded wait, of a project below
its share, takes that model's GPUs back from work that may run elsewhere (PolicyOptions.scarce_swap)
or from a project holding more than its share of them (PolicyOptions.scarce_share)."""
from datetime import datetime, timedelta

from apps.scheduling.policy import (
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Preempt,
    QuotaState,
    Resources,
    RunningWorkload,
    Snapshot,
    WaitKind,
    schedule,
)

T0 = datetime(2026, 1, 1)
# The bounded wait and the time slice as the service runs them, and the rule on (it is off by default).
ON = dict(starvation_seconds=3600, timeslice_seconds=4 * 3600, scarce_swap=True)


def node(name, gpus, model):
    return NodeState(name=name, pool="p", allocatable=Resources(gpus * 1000, 64000, 512 * 1024), gpu_model=model)


def quota(project, gpus):
    return QuotaState(project=project, pool="p", nominal=Resources(gpus * 1000, 10**6, 10**9))


def waiting(id, *, project="a", gpu=1000, model="P100", hours=2.0, priority=3):
    return PendingWorkload(id=id, project=project, pool="p", priority=priority,
                           submitted_at=T0 - timedelta(hours=hours), replicas=1,
                           per_replica=Resources(gpu, 1000, 1024), gpu_model=model)


def held(id, *, project="b", gpu=1000, on="p100", gpus=(0,), model="", hours=5.0, priority=3):
    return RunningWorkload(id=id, project=project, pool="p", priority=priority,
                           per_replica=Resources(gpu, 1000, 1024),
                           placement=({"replica": 0, "node": on, "gpus": list(gpus)},),
                           admitted_at=T0 - timedelta(hours=hours), gpu_model=model)


def decide(pending, running, quotas=None, **options):
    nodes = [node("a100", 8, "A100"), node("p100", 2, "P100")]
    # b's nominal covers all it runs: no reclaim can take anything from it.
    quotas = quotas or [quota("a", 2), quota("b", 10)]
    snapshot = Snapshot(nodes=nodes, quotas=quotas, pending=pending, running=list(running), now=T0)
    return schedule(snapshot, PolicyOptions(**{**ON, **options}))


def preempted(decisions):
    return {d.workload_id: d.reason for d in decisions if isinstance(d, Preempt)}


def full(p100):
    """The A100 node full of b's work, and `p100` on the P100 node."""
    return [held(20, gpu=8000, on="a100", gpus=range(8)), *p100]


def test_work_that_may_run_anywhere_gives_a_scarce_model_back():
    # a (nominal 2 GPUs, using none) has waited 2 h for a P100; both P100s are held by b's work that
    # may run on any model, b within its nominal.
    run = full([held(10, gpus=(0,)), held(11, gpus=(1,), hours=3.0)])
    decisions = decide([waiting(1)], run)
    # One is enough: the most recently admitted.
    assert set(preempted(decisions)) == {11}
    assert "scarce GPU model" in preempted(decisions)[11]
    assert next(d for d in decisions if not isinstance(d, Preempt)).kind == WaitKind.PREEMPTING


def test_nothing_changes_with_the_switch_off_or_within_the_bound():
    run = full([held(10, gpus=(0,)), held(11, gpus=(1,), hours=3.0)])
    assert not preempted(decide([waiting(1)], run, scarce_swap=False))
    assert not PolicyOptions().scarce_swap  # off by default: it did not hold on benchmark e's judging mixes
    assert not preempted(decide([waiting(1, hours=0.5)], run))  # not past the bounded wait
    assert not preempted(decide([waiting(1)], run, starvation_seconds=0))
    # Nor when what the holders may run on is not known (the service does not say yet).
    unknown = full([held(10, gpus=(0,), model=None), held(11, gpus=(1,), hours=3.0, model=None)])
    assert not preempted(decide([waiting(1)], unknown))


def test_only_work_no_bigger_of_no_higher_priority_that_may_run_elsewhere():
    # A 2-GPU job on the P100s is not taken for a 1-GPU one (like for like).
    assert not preempted(decide([waiting(1)], full([held(10, gpu=2000, gpus=(0, 1))])))
    # Nor work of a higher priority class than the waiting work's.
    assert not preempted(decide([waiting(1)], full([held(10, gpus=(0,), priority=2), held(11, gpus=(1,), priority=2)])))
    # Nor work that may run only on P100s itself (b within its share of them: b's nominal is 10 of 10).
    assert not preempted(decide([waiting(1)], full([held(10, gpus=(0,), model="P100"), held(11, gpus=(1,), model="P100")])))
    # Nor for a project at its nominal already.
    busy = [held(30, project="a", gpu=1000, on="a100", gpus=(7,))]
    run = [held(20, gpu=7000, on="a100", gpus=range(7)), held(10, gpus=(0,)), held(11, gpus=(1,)), *busy]
    assert not preempted(decide([waiting(1)], run, quotas=[quota("a", 1), quota("b", 10)]))


def test_a_project_over_its_share_of_a_scarce_model_gives_a_turn_back_after_a_slice():
    # b's work that may run only on P100s holds both of them, within b's nominal (2 GPUs); c holds the
    # A100s within its own. b's share of the P100s is 2/10 of the 2, as is a's, and a holds none. With
    # scarce_share, a's P100 work takes one of b's that has run a slice (4 h); not before the slice,
    # and not with the switch off.
    quotas = [quota("a", 2), quota("b", 2), quota("c", 8)]
    c = held(20, project="c", gpu=8000, on="a100", gpus=range(8))
    run = [c, held(10, gpus=(0,), model="P100", hours=6.0), held(11, gpus=(1,), model="P100", hours=5.0)]
    decisions = decide([waiting(1)], run, quotas=quotas)
    assert set(preempted(decisions)) == {11}
    assert "scarce GPU model" in preempted(decisions)[11]
    young = [c, held(10, gpus=(0,), model="P100", hours=3.0), held(11, gpus=(1,), model="P100", hours=2.0)]
    assert not preempted(decide([waiting(1)], young, quotas=quotas))
    assert not preempted(decide([waiting(1)], run, quotas=quotas, scarce_share=False))
    # Within its share b keeps them: with a nominal of 10 of the pool's 10 GPUs, both P100s are its share.
    assert not preempted(decide([waiting(1)], run, quotas=[quota("a", 2), quota("b", 10), quota("c", 8)]))


def test_with_scarce_migrate_only_work_that_fits_on_another_model_at_once():
    p100 = [held(10, gpus=(0,)), held(11, gpus=(1,), hours=3.0)]
    # The A100 node full: b's P100 work has nowhere else to go now, so it keeps the P100s.
    assert not preempted(decide([waiting(1)], full(p100), scarce_migrate=True))
    # One A100 free: the most recently admitted can move there, and gives its P100 back.
    room = [held(20, gpu=7000, on="a100", gpus=range(7)), *p100]
    assert set(preempted(decide([waiting(1)], room, scarce_migrate=True))) == {11}
