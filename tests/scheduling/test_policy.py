"""The pure policy, over plain data."""
from dataclasses import replace
from datetime import datetime, timedelta

from apps.scheduling.policy import (
    Admit,
    Cohort,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Preempt,
    QuotaState,
    Resources,
    RunningWorkload,
    Snapshot,
    Wait,
    WaitKind,
    schedule,
)

T0 = datetime(2026, 1, 1)


def job(id, *, project="a", priority=3, replicas=1, gpu=0, cpu=1000, mem=1024, at=0, model="", seconds=None):
    return PendingWorkload(id=id, project=project, pool="p", priority=priority, submitted_at=T0 + timedelta(seconds=at),
                           replicas=replicas, per_replica=Resources(gpu, cpu, mem), gpu_model=model,
                           expected_seconds=seconds)


def node(name, gpus=8, cpu=64000, mem=512 * 1024, model="A100", domains=()):
    return NodeState(name=name, pool="p", allocatable=Resources(gpus * 1000, cpu, mem), gpu_model=model,
                     domains=domains)


def quota(project="a", gpus=16, cpu=1_000_000, mem=10**9, borrow=None, lend=None, budget=None, used_hours=0.0):
    return QuotaState(project=project, pool="p", nominal=Resources(gpus * 1000, cpu, mem),
                      borrowing_limit_gpu_milli=borrow, lending_limit_gpu_milli=lend, gpu_hour_budget=budget,
                      gpu_hours_used=used_hours)


def running(id, *, project="a", priority=3, gpu=1000, cpu=1000, mem=1024, nodes=("n1",), gpus=None,
            preemptible=True, at=0, end=None, stopping=False):
    placement = tuple({"replica": i, "node": n, **({"gpus": gpus[i]} if gpus else {})} for i, n in enumerate(nodes))
    return RunningWorkload(id=id, project=project, pool="p", priority=priority, per_replica=Resources(gpu, cpu, mem),
                           placement=placement, preemptible=preemptible, admitted_at=T0 + timedelta(seconds=at),
                           expected_end=end, stopping=stopping)


def by_id(decisions):
    return {d.workload_id: d for d in decisions if not isinstance(d, Preempt)}


def preempted(decisions):
    return {d.workload_id for d in decisions if isinstance(d, Preempt)}


def snap(nodes, quotas, pending, running=(), project_service=None, task_mix=None, **options):
    """schedule's arguments: the snapshot, and PolicyOptions with `options` (the bare policy's otherwise)."""
    return (Snapshot(nodes=nodes, quotas=quotas, pending=pending, running=list(running), now=T0,
                     project_service=project_service, task_mix=task_mix), PolicyOptions(**options))


# -- ordering ------------------------------------------------------------------------------------

def test_priority_then_submit_order():
    pending = [job(1, priority=3, gpu=8000, at=0), job(2, priority=1, gpu=8000, at=5), job(3, priority=1, gpu=8000, at=9)]
    decisions = by_id(schedule(*snap([node("n1")], [quota()], pending, reservations=False)))
    assert isinstance(decisions[2], Admit)
    assert isinstance(decisions[1], Wait) and isinstance(decisions[3], Wait)
    assert "capacity" in decisions[1].reason
    assert decisions[3].queue_position == 1 and decisions[1].queue_position == 2


def test_fair_share_orders_projects_within_a_priority_class():
    # b already uses half of its nominal; a uses nothing: a's later job goes first.
    quotas = [quota("a", gpus=4), quota("b", gpus=4)]
    run = [running(10, project="b", gpu=2000, nodes=("n1",))]
    pending = [job(1, project="b", gpu=2000, at=0), job(2, project="a", gpu=2000, at=5)]
    decisions = by_id(schedule(*snap([node("n1", gpus=4)], quotas, pending, run, reservations=False)))
    assert isinstance(decisions[2], Admit)
    assert isinstance(decisions[1], Wait)


def test_fair_share_alternates_projects_as_the_cycle_admits():
    quotas = [quota("a", gpus=8), quota("b", gpus=8)]
    pending = [job(i, project="a", gpu=1000, at=i) for i in range(1, 5)] + [
        job(10 + i, project="b", gpu=1000, at=100 + i) for i in range(1, 5)]
    decisions = by_id(schedule(*snap([node("n1", gpus=4)], quotas, pending, reservations=False)))
    admitted = {i for i, d in decisions.items() if isinstance(d, Admit)}
    assert admitted == {1, 2, 11, 12}


# -- quota: nominal, borrowing, lending, budgets -------------------------------------------------

def test_quota_blocks_with_a_reason_naming_the_quota():
    decisions = by_id(schedule(*snap([node("n1")], [quota(gpus=1, borrow=0)], [job(1, gpu=2000)])))
    assert isinstance(decisions[1], Wait)
    assert decisions[1].reason.startswith("quota: project 'a' uses 0 GPU on pool 'p' (nominal 1, may borrow 0)")


def test_borrowing_uses_idle_nominal_of_other_projects_up_to_the_limit():
    quotas = [quota("a", gpus=2, borrow=3000), quota("b", gpus=6)]
    pending = [job(1, gpu=4000), job(2, gpu=1000, at=1), job(3, gpu=1000, at=2)]
    decisions = by_id(schedule(*snap([node("n1")], quotas, pending, reservations=False)))
    assert isinstance(decisions[1], Admit) and isinstance(decisions[2], Admit)
    assert isinstance(decisions[3], Wait) and "may borrow 3" in decisions[3].reason


def test_lending_limit_keeps_part_of_a_nominal_private():
    quotas = [quota("a", gpus=2), quota("b", gpus=6, lend=1000)]
    pending = [job(1, gpu=3000), job(2, gpu=1000, at=1)]
    decisions = by_id(schedule(*snap([node("n1")], quotas, pending, reservations=False)))
    assert isinstance(decisions[1], Admit)
    assert isinstance(decisions[2], Wait)
    assert "has 0 of its nominal 2 GPU free on pool 'p' and can borrow 0 more" in decisions[2].reason


def test_no_quota_means_wait():
    decisions = by_id(schedule(*snap([node("n1")], [quota("other")], [job(1)])))
    assert decisions[1].reason == "quota: project 'a' has no quota on pool 'p'"


def test_gpu_hour_budget_is_enforced_at_admission():
    quotas = [quota("a", budget=10, used_hours=9.5)]
    pending = [job(1, gpu=1000, seconds=3600), job(2, gpu=1000, seconds=600, at=1), job(3, cpu=1000, at=2)]
    decisions = by_id(schedule(*snap([node("n1")], quotas, pending)))
    assert isinstance(decisions[1], Wait)
    assert decisions[1].reason.startswith("budget: project 'a' has 0.5 of its 10 GPU-hours left this month")
    assert isinstance(decisions[2], Admit)  # 1/6 GPU-hour fits in what is left
    assert isinstance(decisions[3], Admit)  # CPU-only work is not charged GPU-hours


def test_exhausted_budget_blocks_jobs_of_unknown_length():
    decisions = by_id(schedule(*snap([node("n1")], [quota("a", budget=1, used_hours=1)], [job(1, gpu=1000)])))
    assert "0 of its 1 GPU-hours left" in decisions[1].reason


# -- gang and placement --------------------------------------------------------------------------

def test_gang_is_all_or_nothing():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=100)], [job(1, replicas=3, gpu=4000)], reservations=False)))
    assert isinstance(decisions[1], Wait) and "cannot fit 3 replica(s)" in decisions[1].reason
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=100)], [job(1, replicas=2, gpu=4000)])))
    assert sorted(p["node"] for p in decisions[1].placement) == ["n1", "n2"]


def test_fractional_gpus_share_one_gpu_and_name_it():
    pending = [job(1, gpu=500), job(2, gpu=500, at=1), job(3, gpu=300, at=2)]
    decisions = by_id(schedule(*snap([node("n1", gpus=2)], [quota()], pending)))
    gpus = [decisions[i].placement[0]["gpus"] for i in (1, 2, 3)]
    assert gpus[0] == gpus[1] and gpus[2] != gpus[0]  # two halves packed on one GPU, the third on the other


def test_fraction_goes_to_a_partly_used_gpu_rather_than_breaking_a_whole_one():
    run = [running(10, gpu=600, nodes=("n2",), gpus=[[0]])]
    nodes = [node("n1", gpus=1), node("n2", gpus=2)]
    decisions = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=400)], run)))
    assert decisions[1].placement[0] == {"replica": 0, "node": "n2", "gpus": [0]}


def test_whole_gpu_jobs_best_fit_so_big_nodes_stay_whole():
    nodes = [node("big", gpus=8), node("small", gpus=2)]
    pending = [job(1, gpu=2000), job(2, gpu=8000, at=1)]
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=100)], pending)))
    assert decisions[1].placement[0]["node"] == "small"
    assert decisions[2].placement[0]["node"] == "big"


def test_work_that_may_run_anywhere_leaves_the_nodes_constrained_work_needs():
    # The waiting mix is mostly T4-only work: an unconstrained job goes to the other model's node
    # (on the T4 node it would take what the T4 work needs; FGD counts a model it cannot use as
    # fragmentation).
    nodes = [node("t4", gpus=2, model="T4"), node("g2", gpus=2, model="G2")]
    mix = [(0.9, Resources(1000, 1000, 1024), "T4"), (0.1, Resources(1000, 1000, 1024))]
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=4)], [job(1, gpu=1000)], task_mix=mix)))
    assert decisions[1].placement[0]["node"] == "g2"


def test_gpu_model_constraint_with_alternatives():
    nodes = [node("n1", model="T4"), node("n2", model="A100")]
    decisions = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000, model="H100|A100"), job(2, model="V100")])))
    assert decisions[1].placement[0]["node"] == "n2"
    assert decisions[2].reason == "constraint: pool 'p' has no schedulable node with GPU model V100"


def test_unschedulable_nodes_are_skipped():
    nodes = [NodeState("n1", "p", Resources(8000, 64000, 10**6), "A100", schedulable=False), node("n2")]
    decisions = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000)])))
    assert decisions[1].placement[0]["node"] == "n2"


def test_gang_stays_in_one_topology_domain_when_one_can_hold_it():
    nodes = [node(f"r{r}n{i}", gpus=8, domains=(f"rack{r}",)) for r in range(3) for i in range(4)]
    run = [running(10, gpu=8000, nodes=("r0n0",)), running(11, gpu=8000, nodes=("r1n0",), project="b")]
    quotas = [quota("a", gpus=100), quota("b", gpus=100)]
    decisions = by_id(schedule(*snap(nodes, quotas, [job(1, replicas=3, gpu=8000)], run)))
    racks = {p["node"][:2] for p in decisions[1].placement}
    assert len(racks) == 1
    decisions = by_id(schedule(*snap(nodes, quotas, [job(1, replicas=6, gpu=8000)], run)))
    assert len({p["node"][:2] for p in decisions[1].placement}) == 2


def test_gang_prefers_the_finest_domain_that_holds_it():
    nodes = [node(f"b{b}n{i}", gpus=8, domains=(f"block{b}", "rack0")) for b in range(2) for i in range(2)]
    run = [running(10, gpu=4000, nodes=("b0n0",), gpus=[[0, 1, 2, 3]])]
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=100)], [job(1, replicas=2, gpu=8000)], run)))
    assert {p["node"] for p in decisions[1].placement} == {"b1n0", "b1n1"}


def test_gpu_work_prefers_a_node_where_its_cpu_leaves_the_other_gpus_usable():
    # Both nodes have 2 free GPUs. 15 of "small"'s 16 CPUs would leave its other GPU 1 CPU (less
    # than a quarter of its 8): the CPU-hungry job goes to "big"; a light one packs "small".
    nodes = [node("small", gpus=2, cpu=16000, mem=120 * 1024), node("big", gpus=2, cpu=104000, mem=512 * 1024)]
    mix = [(1.0, Resources(1000, 1000, 1024))]
    hungry = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000, cpu=15000)], task_mix=mix)))
    assert hungry[1].placement[0]["node"] == "big"
    light = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000, cpu=1000)], task_mix=mix)))
    assert light[1].placement[0]["node"] == "small"
    # A preference only: where no node is balanced, the job still runs.
    alone = by_id(schedule(*snap(nodes[:1], [quota()], [job(1, gpu=1000, cpu=15000)], task_mix=mix)))
    assert alone[1].placement[0]["node"] == "small"


def test_unconstrained_whole_gpu_work_leaves_contested_models_to_the_work_that_needs_them():
    # Half the mix needs T4s, under a fifth of the GPUs: T4 is contested. The best fits for an
    # unconstrained 1-GPU job are the half-used T4 nodes (more of them than the candidates scored),
    # but it takes a G2 node while one fits.
    t4s = [node(f"t4-{i}", gpus=2, model="T4") for i in range(7)]
    nodes = t4s + [node("g2a", gpus=8, model="G2"), node("g2b", gpus=8, model="G2"), node("g2c", gpus=8, model="G2")]
    mix = [(0.5, Resources(1000, 1000, 1024), "T4"), (0.5, Resources(1000, 1000, 1024))]
    half_used = [running(10 + i, gpu=1000, nodes=(n.name,), gpus=[[0]]) for i, n in enumerate(t4s)]
    placed = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000)], half_used, task_mix=mix)))
    assert placed[1].placement[0]["node"].startswith("g2")
    # Constrained work, and an unconstrained job with no other node, still use the T4s.
    t4_only = by_id(schedule(*snap(t4s, [quota()], [job(1, gpu=1000)], half_used, task_mix=mix)))
    assert t4_only[1].placement[0]["node"].startswith("t4")
    constrained = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000, model="T4")], half_used, task_mix=mix)))
    assert constrained[1].placement[0]["node"].startswith("t4")
    # Without constrained work in the mix, best fit: a half-used T4 node.
    plain = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=1000)], half_used,
                               task_mix=[(1.0, Resources(1000, 1000, 1024))])))
    assert plain[1].placement[0]["node"].startswith("t4")


def test_cpu_heavy_gpu_work_goes_where_it_strands_no_gpus():
    # The mix's GPU work asks 12 CPUs per GPU. "lean" has exactly that (48 CPUs for 4 GPUs), "rich"
    # 50 per GPU; both run one half-GPU job. A half-GPU job with 12 CPUs (24 per GPU) fragments
    # neither node, and best fit on CPU would pick lean; there it would leave lean's 3 free GPUs
    # 30 CPUs, enough for 2.5 of them, so it goes to rich.
    nodes = [node("lean", gpus=4, cpu=48000), node("rich", gpus=4, cpu=200000)]
    mix = [(1.0, Resources(500, 6000, 1024))]
    half_used = [running(10, gpu=500, cpu=6000, nodes=("lean",), gpus=[[0]]),
                 running(11, gpu=500, cpu=6000, nodes=("rich",), gpus=[[0]])]
    placed = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=500, cpu=12000)], half_used, task_mix=mix)))
    assert placed[1].placement[0]["node"] == "rich"
    # A mix that asks no memory is judged on CPU alone.
    no_memory = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=500, cpu=12000)], half_used,
                                    task_mix=[(1.0, Resources(500, 6000, 0))])))
    assert no_memory[1].placement[0]["node"] == "rich"
    # Work at the mix's own ratio strands nothing on lean: best fit on CPU keeps rich's CPU free.
    light = by_id(schedule(*snap(nodes, [quota()], [job(1, gpu=500, cpu=6000)], half_used, task_mix=mix)))
    assert light[1].placement[0]["node"] == "lean"


def test_cpu_only_work_takes_cpu_that_no_free_gpu_needs():
    # No GPU-node reserve here: the stranded score alone. The mix's GPU work asks 8 CPUs per GPU;
    # both nodes have 2 free GPUs. A 10-CPU job on "tight" (24 CPUs) would leave its GPUs 14 CPUs,
    # short of 16, though one more 1-GPU job still fits (fragmentation sees no loss); best fit on
    # CPU would pick it anyway. It goes to "roomy".
    nodes = [node("tight", gpus=2, cpu=24000), node("roomy", gpus=2, cpu=100000)]
    mix = [(1.0, Resources(1000, 8000, 1024))]
    placed = by_id(schedule(*snap(nodes, [quota()], [job(1, cpu=10000)], task_mix=mix)))
    assert placed[1].placement[0]["node"] == "roomy"


# -- GPU-node reserve: CPU-only work leaves free GPUs the CPU and memory they need ---------------

def test_cpu_only_work_leaves_free_gpus_their_share_of_cpu_and_memory():
    # 8 free GPUs, 64 CPUs, 512 GiB, reserve 50%: 32 CPUs and 256 GiB stay for GPU work.
    nodes = [node("n1")]
    fits = by_id(schedule(*snap(nodes, [quota()], [job(1, cpu=32000)], gpu_node_reserve=0.5)))
    assert fits[1].placement[0]["node"] == "n1"
    too_much_cpu = by_id(schedule(*snap(nodes, [quota()], [job(1, cpu=32001)], gpu_node_reserve=0.5)))
    assert isinstance(too_much_cpu[1], Wait)
    assert "GPU nodes keep 50% of their free GPUs' share of CPU and memory" in too_much_cpu[1].reason
    too_much_memory = by_id(schedule(*snap(nodes, [quota()], [job(1, cpu=1000, mem=256 * 1024 + 1)],
                                          gpu_node_reserve=0.5)))
    assert isinstance(too_much_memory[1], Wait)
    # Off (the policy's own default): CPU-only work may take the whole node, as before.
    off = by_id(schedule(*snap(nodes, [quota()], [job(1, cpu=64000)])))
    assert off[1].placement[0]["node"] == "n1"


def test_the_reserve_is_named_in_a_pending_reason_only_where_it_is_what_blocks():
    # One node of 64 CPUs, reserve 50%: 32 CPUs for CPU-only work. One replica of 40 CPUs would fit
    # without the reserve (it is named); a gang of two would not fit anyway (it is not).
    one = by_id(schedule(*snap([node("n1")], [quota()], [job(1, cpu=40000)], gpu_node_reserve=0.5)))
    assert "GPU nodes keep 50%" in one[1].reason
    gang = by_id(schedule(*snap([node("n1")], [quota()], [job(1, cpu=40000, replicas=2)], gpu_node_reserve=0.5)))
    assert gang[1].reason.startswith("capacity") and "GPU nodes keep" not in gang[1].reason


def test_the_reserve_shrinks_as_the_nodes_gpus_are_taken():
    # 6 of 8 GPUs taken (with 8 CPUs): 56 CPUs free; the 2 free GPUs keep 50% of 2/8 of 64 = 8 CPUs.
    run = [running(10, gpu=6000, cpu=8000, gpus=[[0, 1, 2, 3, 4, 5]])]
    admitted = by_id(schedule(*snap([node("n1")], [quota(gpus=100)], [job(1, cpu=48000)], run, gpu_node_reserve=0.5)))
    assert isinstance(admitted[1], Admit)
    waits = by_id(schedule(*snap([node("n1")], [quota(gpus=100)], [job(1, cpu=48001)], run, gpu_node_reserve=0.5)))
    assert isinstance(waits[1], Wait)
    # Every GPU taken: nothing is kept, CPU-only work may take all that is left, even with a full reserve.
    run = [running(10, gpu=8000, cpu=8000)]
    full = by_id(schedule(*snap([node("n1")], [quota(gpus=100)], [job(1, cpu=56000)], run, gpu_node_reserve=1.0)))
    assert isinstance(full[1], Admit)


def test_gpu_work_is_not_held_back_by_the_reserve():
    decisions = by_id(schedule(*snap([node("n1")], [quota()], [job(1, gpu=1000, cpu=64000)], gpu_node_reserve=1.0)))
    assert isinstance(decisions[1], Admit)


def test_cpu_only_work_goes_where_no_gpu_needs_the_cpu():
    # A full reserve keeps CPU-only work off GPU nodes with free GPUs, so it lands on the CPU node
    # (or waits), and the GPU node keeps all its CPU for the GPU job that comes next.
    nodes = [node("gpu", gpus=8, cpu=64000), node("cpu", gpus=0, cpu=32000, model="")]
    pending = [job(1, cpu=30000), job(2, cpu=20000, at=1), job(3, gpu=8000, cpu=64000, at=2)]
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=100)], pending, reservations=False, gpu_node_reserve=1.0)))
    assert decisions[1].placement[0]["node"] == "cpu"
    assert isinstance(decisions[2], Wait) and "keep 100%" in decisions[2].reason
    assert decisions[3].placement[0]["node"] == "gpu"


# -- preemption ----------------------------------------------------------------------------------

def test_higher_priority_preempts_lower_priority_of_the_same_project_with_a_minimal_set():
    run = [running(10, priority=4, gpu=4000, nodes=("n1",), at=1), running(11, priority=5, gpu=2000, nodes=("n1",), at=2),
           running(12, priority=5, gpu=2000, nodes=("n1",), at=3)]
    decisions = schedule(*snap([node("n1")], [quota(gpus=8)], [job(1, priority=1, gpu=2000)], run))
    assert preempted(decisions) == {12}  # one P5 job is enough; the most recent of them
    wait = by_id(decisions)[1]
    assert wait.reason.startswith("preempting: waiting for 1 preempted workload(s) (12)")
    assert wait.estimated_start == T0 + timedelta(seconds=30)


def test_same_priority_and_other_projects_within_their_nominal_are_not_preempted():
    quotas = [quota("a", gpus=4), quota("b", gpus=4)]
    run = [running(10, priority=3, gpu=4000, nodes=("n1",)), running(11, project="b", priority=5, gpu=4000,
                                                                      nodes=("n1",))]
    decisions = schedule(*snap([node("n1")], quotas, [job(1, priority=3, gpu=1000)], run))
    assert preempted(decisions) == set()


def test_non_preemptible_workloads_are_never_victims():
    run = [running(10, priority=5, gpu=8000, preemptible=False)]
    decisions = schedule(*snap([node("n1")], [quota(gpus=16)], [job(1, priority=0, gpu=1000)], run))
    assert preempted(decisions) == set()
    assert by_id(decisions)[1].reason.startswith("reserved")


def test_a_project_reclaiming_its_nominal_preempts_only_borrowers():
    quotas = [quota("a", gpus=4), quota("b", gpus=4)]
    run = [running(10, project="a", gpu=6000, nodes=("n1",), priority=0),  # a borrows 2 of b's GPUs
           running(11, project="b", gpu=2000, nodes=("n1",), priority=5)]
    decisions = schedule(*snap([node("n1")], quotas, [job(1, project="b", gpu=2000, priority=5)], run))
    assert preempted(decisions) == {10}


def test_quota_held_for_waiting_work_is_not_reclaimed_by_preempting_running_work():
    # c runs a CPU-only job within its nominal; its 1-GPU job waits (reserved), holding a GPU it
    # borrows from a. a's CPU-only job, within its nominal, is blocked only by capacity: c's running
    # job borrows nothing, so it is not a reclaim victim.
    quotas = [quota("a", gpus=2), quota("c", gpus=0)]
    run = [running(10, project="a", gpu=1000, end=T0 + timedelta(hours=1)),
           running(11, project="c", gpu=0, end=T0 + timedelta(hours=2))]
    pending = [job(1, project="c", gpu=1000, cpu=2000), job(2, gpu=2000, at=1), job(3, gpu=0, at=2)]
    decisions = schedule(*snap([node("n1", gpus=2, cpu=3000)], quotas, pending, run))
    assert by_id(decisions)[1].reason.startswith("reserved")
    assert preempted(decisions) == set()
    assert by_id(decisions)[3].reason.startswith("capacity")


def test_a_reclaim_takes_only_work_that_gives_back_what_its_project_borrows():
    # c borrows one of a's GPUs (job 10) and runs a CPU-only job within its CPU nominal (job 11,
    # the newer). a's 1-GPU job needs a GPU and CPU: only the borrowed GPU job is reclaimed.
    quotas = [quota("a", gpus=2), quota("c", gpus=0)]
    run = [running(10, project="c", gpu=1000, at=1), running(11, project="c", gpu=0, at=5)]
    decisions = schedule(*snap([node("n1", gpus=2, cpu=2000)], quotas, [job(1, gpu=1000)], run))
    assert preempted(decisions) == {10}


def _beyond_nominal(own_priority: int, borrowed_priorities: tuple[int, int], requeued_ago: float | None = None):
    # a runs 3 GPUs of its nominal 4, b runs 5 on a nominal of 2 (it borrows 3 of c's idle ones);
    # a's P1 job of 2 GPUs would take a beyond its nominal, so it may not reclaim.
    quotas = [quota("a", gpus=4), quota("b", gpus=2), quota("c", gpus=2)]
    borrowed = running(11, project="b", priority=borrowed_priorities[0], gpu=3000, at=1)
    if requeued_ago is not None:  # preempted before, re-admitted that long ago
        borrowed = replace(borrowed, preemptions=1, admitted_at=T0 - timedelta(seconds=requeued_ago))
    run = [running(10, project="a", priority=own_priority, gpu=3000), borrowed,
           running(12, project="b", priority=borrowed_priorities[1], gpu=2000, at=2)]
    return schedule(*snap([node("n1")], quotas, [job(1, project="a", priority=1, gpu=2000)], run,
                         repreempt_min_runtime_seconds=600))


def test_beyond_its_nominal_a_workload_takes_lower_priority_borrowed_work_before_its_own():
    decisions = _beyond_nominal(own_priority=4, borrowed_priorities=(5, 2))
    assert preempted(decisions) == {11}  # b's P5 borrowed work, not a's own P4 job
    victim = next(d for d in decisions if isinstance(d, Preempt))
    assert "higher priority, on borrowed quota" in victim.reason


def test_beyond_its_nominal_borrowed_work_of_equal_or_higher_priority_is_not_taken():
    assert preempted(_beyond_nominal(own_priority=4, borrowed_priorities=(1, 0))) == {10}


def test_borrowed_work_is_taken_only_instead_of_own_work_that_would_make_room():
    # a's own lower-priority job (half a GPU) cannot make room for a's P1 job of 2 GPUs, so nothing
    # is preempted, though b's borrowed P5 job alone would have made room.
    quotas = [quota("a", gpus=4), quota("b", gpus=2), quota("c", gpus=2)]
    run = [running(10, project="a", priority=0, gpu=3000), running(13, project="a", priority=4, gpu=500),
           running(11, project="b", priority=5, gpu=3000, at=1), running(12, project="b", priority=2, gpu=1500, at=2)]
    decisions = schedule(*snap([node("n1")], quotas, [job(1, project="a", priority=1, gpu=2000)], run))
    assert preempted(decisions) == set()
    assert isinstance(by_id(decisions)[1], Wait)


def test_borrowed_work_preempted_before_is_not_taken_again_until_it_has_run_a_while():
    assert preempted(_beyond_nominal(own_priority=4, borrowed_priorities=(5, 1), requeued_ago=100)) == {10}
    assert preempted(_beyond_nominal(own_priority=4, borrowed_priorities=(5, 1), requeued_ago=700)) == {11}


def test_beyond_its_nominal_with_no_lower_priority_work_of_its_own_nothing_is_preempted():
    decisions = _beyond_nominal(own_priority=0, borrowed_priorities=(5, 5))
    assert preempted(decisions) == set()
    assert isinstance(by_id(decisions)[1], Wait)


def test_a_requeued_victim_does_not_take_back_what_it_freed_for_its_pending_preemptor():
    # x's queue is headed by a big P3 job that would borrow, so x's small in-nominal job W comes
    # after it; y's requeued victim V (P2, borrowing) would come before both and take back the
    # GPU it was preempted to free, and W would preempt again next cycle (ping-pong).
    quotas = [quota("x", gpus=2), quota("y", gpus=2)]
    run = [running(10, project="x", priority=0), running(11, project="y", priority=2),
           running(12, project="y", priority=2)]
    head = job(1, project="x", priority=3, gpu=4000, at=0)
    w = job(2, project="x", priority=4, gpu=1000, at=1)
    v = PendingWorkload(id=3, project="y", pool="p", priority=2, submitted_at=T0, replicas=1,
                        per_replica=Resources(1000, 1000, 1024), preempted_by=2)
    decisions = by_id(schedule(*snap([node("n1", gpus=4)], quotas, [head, w, v], run)))
    assert isinstance(decisions[2], Admit)
    assert isinstance(decisions[3], Wait) and decisions[3].reason.startswith("quota:")
    # Once its preemptor is no longer pending, it is ordered as usual.
    again = by_id(schedule(*snap([node("n1", gpus=4)], quotas, [head, v], run)))
    assert isinstance(again[3], Admit)


def test_a_preemptor_keeps_its_claim_while_its_victims_exit():
    # b borrows; a's job W preempted v and waits for it to exit. c's job X, ordered after W,
    # must not take the GPU W will get (W would then have to preempt again once v is gone).
    quotas = [quota("a", gpus=2), quota("b", gpus=1), quota("c", gpus=1)]
    exits = T0 + timedelta(seconds=20)
    run = [replace(running(10, project="b", gpus=[[0]]), stopping=True, preempted_for=1, expected_end=exits),
           running(11, project="b", gpus=[[1]]), running(12, project="b", gpus=[[2]])]
    w = job(1, project="a", priority=3, gpu=2000)
    x = job(2, project="c", priority=5, gpu=1000)
    decisions = schedule(*snap([node("n1", gpus=4)], quotas, [w, x], run))
    waits = by_id(decisions)
    assert waits[1].reason.startswith("preempting: waiting for 1 preempted workload(s) (10)")
    assert waits[1].estimated_start == exits
    assert not isinstance(waits[2], Admit)  # the free GPU is W's


def test_work_preempted_before_is_not_reclaimed_again_until_it_has_run_a_while():
    quotas = [quota("a", gpus=4), quota("b", gpus=4)]
    w = job(1, project="a", gpu=4000)

    def reclaimed(admitted_ago: float, preemptions: int) -> set[int]:
        borrower = replace(running(10, project="b", gpu=8000, priority=0), preemptions=preemptions,
                           admitted_at=T0 - timedelta(seconds=admitted_ago))
        return preempted(schedule(*snap([node("n1")], quotas, [w], [borrower], repreempt_min_runtime_seconds=600)))

    assert reclaimed(admitted_ago=10, preemptions=0) == {10}  # a first reclaim is immediate
    assert reclaimed(admitted_ago=100, preemptions=1) == set()  # preempted before: protected for 600 s
    assert reclaimed(admitted_ago=700, preemptions=1) == {10}


def test_workloads_that_name_each_other_as_preemptor_still_get_a_decision():
    a = PendingWorkload(id=1, project="a", pool="p", priority=3, submitted_at=T0, replicas=1,
                        per_replica=Resources(1000, 1000, 1024), preempted_by=2)
    b = PendingWorkload(id=2, project="b", pool="p", priority=3, submitted_at=T0, replicas=1,
                        per_replica=Resources(1000, 1000, 1024), preempted_by=1)
    decisions = by_id(schedule(*snap([node("n1")], [quota("a"), quota("b")], [a, b])))
    assert isinstance(decisions[1], Admit) and isinstance(decisions[2], Admit)


def test_stopping_workloads_are_not_preempted_twice():
    run = [running(10, priority=5, gpu=8000, stopping=True, end=T0 + timedelta(seconds=20))]
    decisions = schedule(*snap([node("n1")], [quota(gpus=16)], [job(1, priority=0, gpu=8000)], run))
    assert preempted(decisions) == set()
    wait = by_id(decisions)[1]
    assert wait.reason.startswith("reserved") and wait.estimated_start == T0 + timedelta(seconds=20)


# -- backfill with a reservation -----------------------------------------------------------------

def test_head_of_queue_gets_a_reservation_and_small_jobs_backfill_elsewhere():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    run = [running(10, project="b", gpu=2000, nodes=("n1",), gpus=[[0, 1]], end=T0 + timedelta(hours=1)),
           running(11, project="b", gpu=3000, nodes=("n2",), gpus=[[0, 1, 2]], end=T0 + timedelta(hours=2))]
    pending = [job(1, priority=1, gpu=4000), job(2, priority=3, gpu=1000, at=1), job(3, priority=3, gpu=2000, at=2)]
    decisions = by_id(schedule(*snap(nodes, [quota(gpus=100), quota("b", gpus=100)], pending, run)))
    head = decisions[1]
    assert isinstance(head, Wait) and head.reason.startswith("reserved")
    assert head.estimated_start == T0 + timedelta(hours=1)  # n1 frees first
    assert isinstance(decisions[2], Admit) and decisions[2].placement[0]["node"] == "n2"  # backfilled
    assert isinstance(decisions[3], Wait)  # would take the 2 GPUs held for the head on n1


def test_without_a_reservation_small_jobs_would_starve_the_big_one():
    nodes = [node("n1", gpus=4)]
    run = [running(10, project="b", gpu=2000, nodes=("n1",), gpus=[[0, 1]])]
    pending = [job(1, priority=1, gpu=4000), job(2, priority=3, gpu=2000, at=1)]
    quotas = [quota(gpus=100), quota("b", gpus=100)]
    with_res = by_id(schedule(*snap(nodes, quotas, pending, run)))
    without = by_id(schedule(*snap(nodes, quotas, pending, run, reservations=False)))
    assert isinstance(with_res[2], Wait) and isinstance(without[2], Admit)


def test_a_reservation_does_not_hold_quota_that_the_work_it_waits_for_still_holds():
    # Quota for 16 GPUs (nominal 8 each for a and b), 8 of them in use: b's 4-GPU job on n1, a's
    # on n2. a's 8-GPU job fits the quota but no node: it gets a reservation on n1, whose quota
    # comes back when b's job ends. Counting its 8 GPUs now as well would draw 16 of 16 and leave
    # c's jobs waiting on quota beside 4 idle GPUs on n2; only b's 4 are counted once.
    nodes = [node("n1"), node("n2"), node("n3", gpus=4)]
    quotas = [quota("a", gpus=8), quota("b", gpus=8), quota("c", gpus=0)]
    run = [running(10, project="b", priority=1, gpu=4000, nodes=("n1",), end=T0 + timedelta(hours=1)),
           running(11, project="a", priority=1, gpu=4000, nodes=("n2",), end=T0 + timedelta(hours=2))]
    pending = [job(1, project="a", priority=1, gpu=8000),
               job(2, project="c", priority=3, gpu=4000, at=1), job(3, project="c", priority=3, gpu=4000, at=2)]
    decisions = by_id(schedule(*snap(nodes, quotas, pending, run)))
    assert decisions[1].reason.startswith("reserved") and decisions[1].estimated_start == T0 + timedelta(hours=1)
    assert isinstance(decisions[2], Admit)
    # 8 running + 4 admitted + the reservation's 8 less b's 4 that it will take over: 16 drawn.
    assert decisions[3].reason.startswith("quota: project 'c'")


def test_every_quota_block_has_its_own_kind_and_a_reason_that_says_so():
    cohort = Cohort("p", [quota("a", gpus=2), quota("b", gpus=2), quota("capped", gpus=2, borrow=0)])
    cohort.add("a", (6000, 0, 0))  # a borrows all the nominal of b and capped
    one = (1000, 0, 0)
    blocks = {
        WaitKind.QUOTA_LENT: (cohort.check("b", one), "other projects have borrowed it"),
        WaitKind.QUOTA_LENDABLE: (cohort.check("a", one), "can borrow 0 more"),
        WaitKind.QUOTA_LIMIT: (cohort.check("capped", (3000, 0, 0)), "may borrow 0"),
        WaitKind.QUOTA_NONE: (cohort.check("stranger", one), "has no quota on pool 'p'"),
    }
    for kind, (block, says) in blocks.items():
        assert block.kind == kind and block.reason.startswith("quota: ") and says in block.reason


# -- bounded wait ----------------------------------------------------------------------------------

def _starving_setup():
    # n1 has 4 GPUs, 2 held by project b until T0 + 1 h. Project a's 4-GPU P4 job has waited 2 h;
    # project c's 2-GPU P2 job arrived just now and would fit in the 2 free GPUs.
    nodes = [node("n1", gpus=4)]
    run = [running(10, project="b", gpu=2000, nodes=("n1",), gpus=[[0, 1]], end=T0 + timedelta(hours=1))]
    old = replace(job(1, priority=4, gpu=4000), submitted_at=T0 - timedelta(hours=2))
    new = job(2, project="c", priority=2, gpu=2000)
    quotas = [quota(gpus=100), quota("b", gpus=100), quota("c", gpus=100)]
    return nodes, quotas, [old, new], run


def test_a_workload_pending_past_the_bound_goes_before_newer_work_of_any_priority():
    nodes, quotas, pending, run = _starving_setup()
    strict = by_id(schedule(*snap(nodes, quotas, pending, run)))
    assert isinstance(strict[2], Admit)  # strict priority: the new P2 job takes the free GPUs...
    assert isinstance(strict[1], Wait) and not strict[1].reason.startswith("reserved")  # ...nothing left to hold
    bounded = by_id(schedule(*snap(nodes, quotas, pending, run, starvation_seconds=3600)))
    assert bounded[1].reason.startswith("reserved")  # the old job holds the free GPUs for its start at T0 + 1 h
    assert bounded[1].estimated_start == T0 + timedelta(hours=1)
    assert isinstance(bounded[2], Wait)
    # Below the bound, order is strict again.
    recent = by_id(schedule(*snap(nodes, quotas, pending, run, starvation_seconds=3 * 3600)))
    assert isinstance(recent[2], Admit)
    off = by_id(schedule(*snap(nodes, quotas, pending, run, starvation_seconds=0)))  # the setting's "off"
    assert isinstance(off[2], Admit)


def test_the_bounded_wait_gives_no_right_to_preempt_by_priority():
    nodes, quotas, pending, run = _starving_setup()
    # A starving P4 job does not preempt a running P3 job of its own project.
    mine = [running(10, project="a", priority=3, gpu=2000, nodes=("n1",), gpus=[[0, 1]], end=T0 + timedelta(hours=1))]
    decisions = schedule(*snap(nodes, quotas, [pending[0]], mine, starvation_seconds=3600))
    assert not preempted(decisions) and isinstance(by_id(decisions)[1], Wait)


def test_past_the_bound_a_project_below_its_nominal_goes_with_the_work_within_nominal():
    # Nominal 2 GPUs each; n1 (4 GPUs) has 2 held by b until T0 + 1 h. a uses nothing and its
    # 4-GPU job, bigger than its nominal, has waited 2 h; c's 2-GPU job, within c's nominal, came now.
    nodes = [node("n1", gpus=4)]
    run = [running(10, project="b", gpu=2000, nodes=("n1",), gpus=[[0, 1]], end=T0 + timedelta(hours=1))]
    old = replace(job(1, priority=3, gpu=4000), submitted_at=T0 - timedelta(hours=2))
    new = job(2, project="c", priority=3, gpu=2000)
    quotas = [quota(gpus=2), quota("b", gpus=2), quota("c", gpus=2)]
    bounded = by_id(schedule(*snap(nodes, quotas, [old, new], run, starvation_seconds=3600)))
    # a's job is ordered with the work within nominal, ahead of c's newer job: it holds the free
    # GPUs for its start when b's job ends, and c's job waits.
    assert bounded[1].reason.startswith("reserved") and bounded[1].estimated_start == T0 + timedelta(hours=1)
    assert isinstance(bounded[2], Wait)
    assert not preempted(schedule(*snap(nodes, quotas, [old, new], run, starvation_seconds=3600)))  # no reclaim right
    # Within the bound, or once a uses its nominal, work within nominal goes first again.
    recent = by_id(schedule(*snap(nodes, quotas, [replace(old, submitted_at=T0 - timedelta(minutes=30)), new], run,
                                 starvation_seconds=3600)))
    assert isinstance(recent[2], Admit)
    busy = run + [running(11, project="a", gpu=2000, nodes=("n2",), gpus=[[0, 1]])]
    using = by_id(schedule(*snap(nodes + [node("n2", gpus=2)], quotas, [old, new], busy, starvation_seconds=3600)))
    assert isinstance(using[2], Admit)


# -- issue 31, fairness on any task mix --------------------------------------------------------------

def test_a_reservation_waits_for_the_most_recently_admitted_work_when_run_times_are_unknown():
    # Two 8-GPU nodes, each half taken by a job of unknown run time: n1's admitted a day ago, n2's an
    # hour ago. Run times are heavy-tailed (a job that has run a day is likely to run days more), so a
    # whole-node job reserves n2, holding its 4 free GPUs, and a later 4-GPU job backfills on n1.
    nodes = [node("n1"), node("n2")]
    run = [running(10, project="b", gpu=4000, nodes=("n1",), gpus=[[0, 1, 2, 3]], at=-86400),
           running(11, project="b", gpu=4000, nodes=("n2",), gpus=[[0, 1, 2, 3]], at=-3600)]
    quotas = [quota(gpus=100), quota("b", gpus=100)]
    decisions = by_id(schedule(*snap(nodes, quotas, [job(1, gpu=8000), job(2, gpu=4000, at=1)], run)))
    assert decisions[1].reason.startswith("reserved") and decisions[1].estimated_start is None
    assert isinstance(decisions[2], Admit) and decisions[2].placement[0]["node"] == "n1"
    # The other way round (n2's job the older), the hold moves to n1 and the backfill to n2.
    swapped = [replace(run[0], admitted_at=run[1].admitted_at), replace(run[1], admitted_at=run[0].admitted_at)]
    decisions = by_id(schedule(*snap(nodes, quotas, [job(1, gpu=8000), job(2, gpu=4000, at=1)], swapped)))
    assert isinstance(decisions[2], Admit) and decisions[2].placement[0]["node"] == "n2"
    # Known ends still come first, whatever the age: n1's job ends in 5 minutes.
    ends = [replace(run[0], expected_end=T0 + timedelta(minutes=5)), run[1]]
    decisions = by_id(schedule(*snap(nodes, quotas, [job(1, gpu=8000), job(2, gpu=4000, at=1)], ends)))
    assert decisions[1].estimated_start == T0 + timedelta(minutes=5)
    assert decisions[2].placement[0]["node"] == "n2"


def test_work_past_the_bound_goes_in_order_of_its_projects_service_worst_served_first():
    # One free GPU; a's and c's 1-GPU jobs have both waited past the bound, a's longer. By priority,
    # share and submit time a's would go first; c has been served worse (it held 10% of its time in
    # the system against a's 90%), so c's goes first; swapping the histories swaps the order.
    nodes = [node("n1", gpus=1)]
    quotas = [quota(gpus=1), quota("c", gpus=1)]
    old_a = replace(job(1, gpu=1000), submitted_at=T0 - timedelta(hours=3))
    old_c = replace(job(2, project="c", gpu=1000), submitted_at=T0 - timedelta(hours=2))
    history = {("p", "a"): (900.0, 1000.0), ("p", "c"): (100.0, 1000.0)}
    served = by_id(schedule(*snap(nodes, quotas, [old_a, old_c], starvation_seconds=3600, project_service=history)))
    assert isinstance(served[2], Admit) and isinstance(served[1], Wait)
    swapped = {("p", "a"): history[("p", "c")], ("p", "c"): history[("p", "a")]}
    served = by_id(schedule(*snap(nodes, quotas, [old_a, old_c], starvation_seconds=3600, project_service=swapped)))
    assert isinstance(served[1], Admit) and isinstance(served[2], Wait)
    # Within the bound the service ratio plays no part: submit time decides.
    fresh = [replace(old_a, submitted_at=T0 - timedelta(minutes=3)), replace(old_c, submitted_at=T0 - timedelta(minutes=2))]
    served = by_id(schedule(*snap(nodes, quotas, fresh, starvation_seconds=3600, project_service=history)))
    assert isinstance(served[1], Admit)
    # A project with no history counts as fully served.
    served = by_id(schedule(*snap(nodes, quotas, [old_a, old_c], starvation_seconds=3600,
                                 project_service={("p", "a"): (100.0, 1000.0)})))
    assert isinstance(served[1], Admit)


def _reclaim_setup():
    # Nominal 3 GPUs each; n1 has 4 GPUs, n2 2. b runs 6 GPUs (3 borrowed): 2 on n2, 2 + 2 on n1. a uses
    # nothing and its 4-GPU job, bigger than its nominal, has waited 2 h.
    nodes = [node("n1", gpus=4), node("n2", gpus=2)]
    run = [running(10, project="b", gpu=2000, nodes=("n2",), gpus=[[0, 1]], at=-7200),
           running(11, project="b", gpu=2000, nodes=("n1",), gpus=[[0, 1]], at=-3600),
           running(12, project="b", gpu=2000, nodes=("n1",), gpus=[[2, 3]], at=-600)]
    quotas = [quota(gpus=3), quota("b", gpus=3)]
    old = replace(job(1, gpu=4000), submitted_at=T0 - timedelta(hours=2))
    return nodes, quotas, old, run


def test_past_the_bound_a_project_below_its_nominal_reclaims_borrowed_quota():
    # a's job reclaims b's borrowed work on n1 (a's nominal is guaranteed, and a whole 4 GPUs is the
    # only form its job can use it in).
    nodes, quotas, old, run = _reclaim_setup()
    decisions = schedule(*snap(nodes, quotas, [old], run, starvation_seconds=3600))
    assert preempted(decisions) == {11, 12}
    assert by_id(decisions)[1].kind == WaitKind.PREEMPTING
    # Only borrowed work is taken: b borrowing 1 GPU, room for the job would take b's nominal too: none.
    assert not preempted(schedule(*snap(nodes, quotas, [old], run[1:], starvation_seconds=3600)))
    # Within the bound, or once a uses its nominal, no reclaim: the job is beyond its nominal.
    recent = replace(old, submitted_at=T0 - timedelta(minutes=30))
    assert not preempted(schedule(*snap(nodes, quotas, [recent], run, starvation_seconds=3600)))
    using = [*run, running(13, project="a", gpu=3000, nodes=("n3",), gpus=[[0, 1, 2]])]
    assert not preempted(schedule(*snap([*nodes, node("n3", gpus=3)], quotas, [old], using, starvation_seconds=3600)))


def test_a_requeued_victim_is_past_the_bound_from_its_submission_but_gains_no_reclaim_right():
    nodes, quotas, pending, run = _starving_setup()
    # Submitted 2 h ago, preempted and requeued since: its time in the system began at its submission,
    # so it is past the bound and goes before the new P2 job.
    victim = replace(pending[0], preempted_by=99)
    decisions = by_id(schedule(*snap(nodes, quotas, [victim, pending[1]], run, starvation_seconds=3600)))
    assert decisions[1].reason.startswith("reserved") and isinstance(decisions[2], Wait)
    recent = replace(victim, submitted_at=T0 - timedelta(minutes=30))
    decisions = by_id(schedule(*snap(nodes, quotas, [recent, pending[1]], run, starvation_seconds=3600)))
    assert isinstance(decisions[2], Admit)
    # It may not reclaim, though its project is below its nominal: reclaimed back and forth, borrowed
    # work would ping-pong. The same job not requeued does.
    nodes, quotas, old, run = _reclaim_setup()
    assert preempted(schedule(*snap(nodes, quotas, [old], run, starvation_seconds=3600))) == {11, 12}
    requeued = replace(old, preempted_by=99)
    assert not preempted(schedule(*snap(nodes, quotas, [requeued], run, starvation_seconds=3600)))


# -- issue 31, fourth round: the time slice ----------------------------------------------------------

def _slice_setup():
    # One 8-GPU node, all of it held by project a's P3 job admitted 5 h ago (run time unknown). a's
    # whole-node P3 job has waited 2 h: past the bounded wait (1 h), and the running one has had a
    # 4-hour slice. Quota is ample: only the node is in the way.
    nodes = [node("n1")]
    run = [running(10, gpu=8000, gpus=[list(range(8))], at=-5 * 3600)]
    old = replace(job(1, gpu=8000), submitted_at=T0 - timedelta(hours=2))
    quotas = [quota(gpus=100), quota("b", gpus=100)]
    return nodes, quotas, old, run


def test_past_the_bound_multi_gpu_work_takes_a_slice_from_its_projects_long_running_work():
    nodes, quotas, old, run = _slice_setup()
    sliced = dict(starvation_seconds=3600, timeslice_seconds=4 * 3600)
    decisions = schedule(*snap(nodes, quotas, [old], run, **sliced))
    assert preempted(decisions) == {10}
    assert by_id(decisions)[1].kind == WaitKind.PREEMPTING
    reason = next(d.reason for d in decisions if isinstance(d, Preempt))
    assert "time slice" in reason and "after 4 h of running" in reason
    # Not before the slice is up (3 h of running), nor within the bound, nor with the slice off.
    assert not preempted(schedule(*snap(nodes, quotas, [old], [replace(run[0], admitted_at=T0 - timedelta(hours=3))],
                                       **sliced)))
    recent = replace(old, submitted_at=T0 - timedelta(minutes=30))
    assert not preempted(schedule(*snap(nodes, quotas, [recent], run, **sliced)))
    assert not preempted(schedule(*snap(nodes, quotas, [old], run, starvation_seconds=3600, timeslice_seconds=0)))
    assert not preempted(schedule(*snap(nodes, quotas, [old], run, starvation_seconds=0, timeslice_seconds=4 * 3600)))


def test_the_time_slice_stays_within_the_project_and_its_priority_and_leaves_single_gpu_work_out():
    nodes, quotas, old, run = _slice_setup()
    sliced = dict(starvation_seconds=3600, timeslice_seconds=4 * 3600)
    # Another project's long-running work of the same priority is not sliced: the slice gives the
    # project's own place to its own work, whatever the quota.
    theirs = [replace(run[0], project="b")]
    assert not preempted(schedule(*snap(nodes, quotas, [old], theirs, **sliced)))
    # Nor the project's own work of a higher priority.
    higher = [replace(run[0], priority=2)]
    assert not preempted(schedule(*snap(nodes, quotas, [old], higher, **sliced)))
    # Single-GPU work does not slice: with the node's 8 GPUs held by eight long single-GPU jobs of a,
    # a's single-GPU job waits; a's 2-GPU job takes the place of the two that were admitted first.
    singles = [running(20 + i, gpu=1000, gpus=[[i]], at=-5 * 3600 + i) for i in range(8)]
    one = replace(job(1, gpu=1000), submitted_at=T0 - timedelta(hours=2))
    assert not preempted(schedule(*snap(nodes, quotas, [one], singles, **sliced)))
    two = replace(job(1, gpu=2000), submitted_at=T0 - timedelta(hours=2))
    assert preempted(schedule(*snap(nodes, quotas, [two], singles, **sliced))) == {20, 21}
