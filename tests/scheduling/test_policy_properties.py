"""Properties of the policy over random clusters, quotas and workloads (hypothesis).

Each example schedules a first batch on an empty cluster (its admissions become the running
workloads, so the starting state is one the scheduler itself produced), then a second batch,
and checks the decisions of the second cycle.
"""
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from apps.scheduling.policy import (
    Admit,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Pool,
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
PROJECTS = ("a", "b", "c")

nodes_st = st.lists(
    st.tuples(st.sampled_from([0, 1, 2, 4, 8]), st.integers(2, 64), st.integers(4, 256), st.sampled_from("XY"),
              st.integers(0, 2)),
    min_size=1, max_size=6,
)
quota_st = st.tuples(st.integers(0, 16), st.one_of(st.none(), st.integers(0, 8)), st.one_of(st.none(), st.integers(0, 8)))
work_st = st.lists(
    st.tuples(st.sampled_from(PROJECTS), st.integers(0, 5), st.integers(1, 4),
              st.sampled_from([0, 250, 500, 700, 1000, 2000, 4000, 8000]), st.integers(1, 16), st.integers(1, 64),
              st.sampled_from(["", "X", "Y", "X|Y"]), st.booleans()),
    max_size=14,
)


def build(nodes, quotas, first, second):
    node_states = [
        NodeState(name=f"n{i}", pool="p", allocatable=Resources(g * 1000, c * 1000, m * 1024), gpu_model=model,
                  domains=(f"rack{d}",))
        for i, (g, c, m, model, d) in enumerate(nodes)
    ]
    quota_states = [
        QuotaState(project=p, pool="p", nominal=Resources(n * 1000, 10**7, 10**9),
                   borrowing_limit_gpu_milli=None if b is None else b * 1000,
                   lending_limit_gpu_milli=None if l_ is None else l_ * 1000)
        for p, (n, b, l_) in zip(PROJECTS, quotas, strict=True)
    ]

    def pending(batch, offset):
        return [
            PendingWorkload(id=offset + i, project=p, pool="p", priority=prio, submitted_at=T0 + timedelta(seconds=i),
                            replicas=r, per_replica=Resources(g, c * 1000, m * 1024), gpu_model=model)
            for i, (p, prio, r, g, c, m, model, _) in enumerate(batch)
        ]

    first_pending = pending(first, 0)
    meta = {w.id: spec for w, spec in zip(first_pending, first, strict=True)}
    decisions = schedule(Snapshot(node_states, quota_states, first_pending, now=T0))
    by_id = {w.id: w for w in first_pending}
    running = [
        RunningWorkload(id=d.workload_id, project=by_id[d.workload_id].project, pool="p",
                        priority=by_id[d.workload_id].priority, per_replica=by_id[d.workload_id].per_replica,
                        placement=tuple(d.placement), preemptible=meta[d.workload_id][7],
                        admitted_at=T0 + timedelta(seconds=d.workload_id))
        for d in decisions if isinstance(d, Admit)
    ]
    return node_states, quota_states, running, pending(second, 100)


def check_state(node_states, quota_states, holders):
    """holders: (project, per_replica, placement) of everything holding resources."""
    alloc = {n.name: n.allocatable for n in node_states}
    gpu_use: dict[tuple[str, int], int] = {}
    node_use: dict[str, list[int]] = {}
    used: dict[str, list[int]] = {q.project: [0, 0, 0] for q in quota_states}
    for project, per, placement in holders:
        for entry in placement:
            use = node_use.setdefault(entry["node"], [0, 0, 0])
            use[1] += per.cpu_milli
            use[2] += per.memory_mb
            for g in entry.get("gpus", []):
                gpu_use[(entry["node"], g)] = gpu_use.get((entry["node"], g), 0) + min(per.gpu_milli, 1000)
            assert len(entry.get("gpus", [])) == -(-per.gpu_milli // 1000)
        for d, value in enumerate(per.as_tuple()):
            used[project][d] += value * len(placement)
    for name, (_, cpu, mem) in node_use.items():
        assert cpu <= alloc[name].cpu_milli and mem <= alloc[name].memory_mb, f"node {name} over-committed"
    for (name, g), milli in gpu_use.items():
        assert g < alloc[name].gpu_milli // 1000 and milli <= 1000, f"GPU {g} of {name} over-committed"
    for d in range(3):
        borrowed = 0
        lendable = 0
        for q in quota_states:
            nominal = q.nominal.as_tuple()[d]
            lend = nominal if d or q.lending_limit_gpu_milli is None else min(q.lending_limit_gpu_milli, nominal)
            limit = None if d or q.borrowing_limit_gpu_milli is None else q.borrowing_limit_gpu_milli
            u = used[q.project][d]
            if limit is not None:
                assert u <= nominal + limit, f"{q.project} borrows beyond its limit"
            borrowed += max(0, u - nominal)
            lendable += min(lend, max(0, nominal - u))
        assert borrowed <= lendable, "borrowed more than the others could lend"


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st)
# A reservation's quota claim once made c a "borrower" whose running CPU-only job a reclaimed (CI, 2026-11).
@example(nodes=[(0, 2, 4, "X", 0)] * 2 + [(0, 3, 4, "X", 0)] + [(0, 4, 4, "X", 0)] * 2 + [(1, 4, 4, "X", 0)],
         quotas=((1, None, None), (0, None, None), (0, None, None)),
         first=[("a", 0, 1, 0, 1, 1, "", False)] * 9 + [("a", 0, 1, 0, 1, 1, "Y", False), ("a", 0, 1, 250, 1, 1, "", False),
                                                        ("c", 0, 1, 0, 1, 1, "", True)],
         second=[("a", 0, 1, 0, 1, 1, "", False)] * 8 + [("a", 0, 1, 1000, 1, 1, "", False)]
         + [("a", 0, 1, 0, 1, 1, "", False)] * 2 + [("c", 0, 1, 250, 1, 1, "", False)])
# c borrowed GPU quota for work admitted in the same cycle; a, needing CPU, once reclaimed c's CPU-only job.
@example(nodes=[(0, 2, 4, "X", 0)] * 4 + [(1, 3, 4, "X", 0)], quotas=((1, None, None), (0, None, None), (0, None, None)),
         first=[("a", 0, 1, 0, 1, 1, "", False)] * 6 + [("a", 0, 1, 250, 1, 1, "", False), ("c", 0, 1, 0, 1, 1, "", True)],
         second=[("a", 0, 1, 0, 1, 1, "", False)] * 2 + [("a", 0, 2, 500, 1, 1, "", False)]
         + [("a", 0, 1, 0, 1, 1, "", False)] * 2 + [("c", 0, 1, 250, 1, 1, "", False)])
def test_invariants_hold_for_random_clusters(nodes, quotas, first, second):
    node_states, quota_states, running, pending = build(nodes, quotas, first, second)
    check_state(node_states, quota_states, [(r.project, r.per_replica, r.placement) for r in running])
    decisions = schedule(Snapshot(node_states, quota_states, pending, running=running, now=T0))
    by_id = {w.id: w for w in pending}
    running_by_id = {r.id: r for r in running}
    waits = [d for d in decisions if isinstance(d, Wait)]
    admits = [d for d in decisions if isinstance(d, Admit)]
    preempts = [d for d in decisions if isinstance(d, Preempt)]
    assert {d.workload_id for d in waits + admits} == set(by_id)  # one decision per pending workload
    # Every wait says what it waits on, for code (kind) as for people (the reason's own prefix).
    kinds = {v for k, v in vars(WaitKind).items() if k.isupper()}
    for d in waits:
        assert d.kind in kinds and d.reason.startswith(d.kind.split("_")[0] + ":")

    # Gangs: all replicas or nothing.
    for d in admits:
        assert sorted(p["replica"] for p in d.placement) == list(range(by_id[d.workload_id].replicas))
    # Nodes and quotas: running (victims still hold theirs until they exit) + admitted.
    holders = [(r.project, r.per_replica, r.placement) for r in running]
    holders += [(by_id[d.workload_id].project, by_id[d.workload_id].per_replica, d.placement) for d in admits]
    check_state(node_states, quota_states, holders)
    # Non-preemptible workloads are never preempted; a victim is lower priority in the same
    # project, or another project's while that project borrows.
    for p in preempts:
        victim = running_by_id[p.workload_id]
        assert victim.preemptible
        preemptor = by_id[p.preemptor_id]
        if victim.project == preemptor.project:
            assert victim.priority > preemptor.priority
        else:
            # ...of a resource the victim gives back and the preemptor needs, counting what the
            # victim's project runs and what this cycle admitted for it.
            q = next(q for q in quota_states if q.project == victim.project)
            holding = [r.per_replica.times(len(r.placement)).as_tuple() for r in running if r.project == victim.project]
            holding += [by_id[d.workload_id].per_replica.times(len(d.placement)).as_tuple() for d in admits
                        if by_id[d.workload_id].project == victim.project]
            used = [sum(col) for col in zip(*holding, strict=True)]
            need = preemptor.per_replica.times(preemptor.replicas).as_tuple()
            assert any(u > n and v and k for u, n, v, k in zip(used, q.nominal.as_tuple(), victim.per_replica.as_tuple(),
                                                             need, strict=True)), "a victim of another project borrows"

    # The first waiting workload of the pool is not left behind lower-priority work of its
    # project that it could preempt: even without all of that work, it would not fit.
    preemptors = {p.preemptor_id for p in preempts}
    first_wait = next((d for d in waits if d.queue_position == 1), None)
    if first_wait is None or first_wait.workload_id in preemptors:
        return
    w = by_id[first_wait.workload_id]
    if first_wait.reason.startswith(("budget", "constraint")):
        return
    lower = {r.id for r in running if r.project == w.project and r.priority > w.priority and r.preemptible}
    lower |= {d.workload_id for d in admits if by_id[d.workload_id].project == w.project
              and by_id[d.workload_id].priority > w.priority}
    if not lower:
        return
    remaining = [r for r in running if r.id not in lower]
    remaining += [
        RunningWorkload(id=d.workload_id, project=by_id[d.workload_id].project, pool="p",
                        priority=by_id[d.workload_id].priority, per_replica=by_id[d.workload_id].per_replica,
                        placement=tuple(d.placement))
        for d in admits if d.workload_id not in lower
    ]
    again = schedule(Snapshot(node_states, quota_states, [w], running=remaining, now=T0), PolicyOptions(preemption=False, reservations=False))
    assert not isinstance(again[0], Admit), f"{w.id} could have preempted lower-priority work of its project"


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st)
def test_memoised_waits_change_no_decision(nodes, quotas, first, second):
    node_states, quota_states, running, pending = build(nodes, quotas, first, second + second)  # repeated shapes
    snapshot = Snapshot(node_states, quota_states, pending, running=running, now=T0)
    with_memo = schedule(snapshot)
    without = schedule(snapshot, PolicyOptions(memo_waits=False))
    assert with_memo == without


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st, st.data())
def test_memoised_waits_change_no_decision_past_the_bounded_wait(nodes, quotas, first, second, data):
    # The rules of the bounded wait (order by the service ratio, the reclaim of a project below its
    # nominal, requeued victims, the time slice) depend on a workload's age and history, which the
    # memo's key does not name: memoised waits must still change no decision.
    node_states, quota_states, running, pending = build(nodes, quotas, first, second + second)
    ages = data.draw(st.lists(st.sampled_from([0, 1800, 7200, 86400]), min_size=len(pending), max_size=len(pending)))
    requeued = data.draw(st.lists(st.booleans(), min_size=len(pending), max_size=len(pending)))
    pending = [replace(w, submitted_at=T0 - timedelta(seconds=age), preempted_by=10**6 if again else None)
               for w, age, again in zip(pending, ages, requeued, strict=True)]
    ran = data.draw(st.lists(st.sampled_from([0, 3600, 5 * 3600, 86400]), min_size=len(running), max_size=len(running)))
    running = [replace(r, admitted_at=T0 - timedelta(seconds=s)) for r, s in zip(running, ran, strict=True)]
    service = {("p", p): (data.draw(st.floats(0, 100)), 100.0) for p in PROJECTS}
    snapshot = Snapshot(node_states, quota_states, pending, running=running, now=T0, project_service=service)
    options = PolicyOptions(starvation_seconds=3600, timeslice_seconds=4 * 3600)
    with_memo = schedule(snapshot, options)
    without = schedule(snapshot, replace(options, memo_waits=False))
    assert with_memo == without
    # A project's own victim is of a lower priority, or of the same one when the time slice applies:
    # it has run a slice, and its preemptor has waited past the bound and asks for 2 GPUs or more.
    by_id = {w.id: w for w in pending}
    running_by_id = {r.id: r for r in running}
    for p in (d for d in with_memo if isinstance(d, Preempt)):
        victim, preemptor = running_by_id[p.workload_id], by_id[p.preemptor_id]
        if victim.project != preemptor.project or victim.priority > preemptor.priority:
            continue
        assert victim.priority == preemptor.priority and "time slice" in p.reason
        assert victim.admitted_at <= T0 - timedelta(hours=4)
        assert preemptor.submitted_at <= T0 - timedelta(hours=1)
        assert preemptor.per_replica.gpu_milli * preemptor.replicas >= 2000


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st, st.sampled_from([0.25, 0.5, 1.0]))
# Two clusters where a backfill reservation once held the free GPUs the check counted (CI, 2026-11).
@example(nodes=[(0, 2, 4, "X", 0)] * 4 + [(1, 2, 4, "X", 1), (1, 3, 4, "X", 0)], quotas=((0, None, None),) * 2 + ((2, None, None),),
         first=[("a", 0, 2, 250, 2, 1, "", False)],
         second=[("a", 0, 1, 0, 1, 1, "", False)] * 11 + [("b", 0, 2, 500, 1, 1, "", False)], reserve=0.25)
@example(nodes=[(0, 2, 4, "X", 0)] * 5 + [(2, 12, 122, "X", 0)], quotas=((0, None, None),) * 2 + ((2, None, None),),
         first=[("a", 0, 1, 0, 1, 1, "", False)] * 12 + [("a", 0, 1, 0, 1, 46, "", False), ("a", 0, 1, 500, 1, 47, "", False)],
         second=[("a", 0, 1, 0, 1, 1, "", False)] * 4 + [("a", 0, 2, 700, 1, 1, "", False), ("a", 0, 1, 0, 1, 1, "", False)],
         reserve=0.25)
def test_cpu_only_admissions_never_take_what_free_gpus_keep(nodes, quotas, first, second, reserve):
    node_states, quota_states, running, pending = build(nodes, quotas, first, second)
    # Without backfill reservations or preemption: both hold free GPUs for a waiting workload (the
    # head of the queue, a preemptor), and held GPUs keep no CPU from other work (the holder's plan
    # has already counted its own), which this replay of admissions cannot see.
    decisions = schedule(Snapshot(node_states, quota_states, pending, running=running, now=T0),
                         PolicyOptions(gpu_node_reserve=reserve, reservations=False, preemption=False))
    by_id = {w.id: w for w in pending}
    alloc = {n.name: n.allocatable for n in node_states}
    free = {n.name: [n.allocatable.gpu_milli, n.allocatable.cpu_milli, n.allocatable.memory_mb] for n in node_states}

    def take(per, placement):
        for entry in placement:
            here = free[entry["node"]]
            here[0] -= min(per.gpu_milli, 1000) * len(entry.get("gpus", []))
            here[1] -= per.cpu_milli
            here[2] -= per.memory_mb

    for r in running:
        take(r.per_replica, r.placement)
    # Replay the admissions in the order the cycle made them (victims hold theirs until they exit).
    for d in decisions:
        if not isinstance(d, Admit):
            continue
        per = by_id[d.workload_id].per_replica
        if per.gpu_milli == 0:
            for entry in d.placement:
                cap, (gpu, cpu, mem) = alloc[entry["node"]], free[entry["node"]]
                if cap.gpu_milli and gpu > 0:
                    share = reserve * gpu / cap.gpu_milli
                    assert cpu - per.cpu_milli >= int(cap.cpu_milli * share), "took CPU that free GPUs keep"
                    assert mem - per.memory_mb >= int(cap.memory_mb * share), "took memory that free GPUs keep"
                free[entry["node"]][1] -= per.cpu_milli
                free[entry["node"]][2] -= per.memory_mb
        else:
            take(per, d.placement)


shape_st = st.tuples(st.sampled_from([0, 250, 500, 1000, 2000, 4000]), st.integers(1, 16), st.integers(1, 64))
models_st = st.sampled_from([None, frozenset("X"), frozenset("Y"), frozenset("XY")])


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 4, 8]), st.integers(2, 64), st.integers(4, 256),
                          st.sampled_from("XY"), st.integers(0, 2), st.integers(0, 1)), min_size=1, max_size=8),
       st.lists(st.tuples(shape_st, st.integers(1, 4), models_st, st.booleans()), max_size=24),
       st.sampled_from([0.0, 0.5]))
def test_the_pools_kept_indexes_equal_ones_computed_afresh(nodes, ops, reserve):
    """What a pool keeps up to date from the nodes that changed (per-domain capacities for gangs, the
    most-free-node summary) equals what a fresh look at every node gives, after any sequence of
    placements, removals and trial placements."""
    node_states = [
        NodeState(name=f"n{i}", pool="p", allocatable=Resources(g * 1000, c * 1000, m * 1024), gpu_model=model,
                  domains=(f"block{d}", f"rack{r}"))
        for i, (g, c, m, model, d, r) in enumerate(nodes)
    ]
    pool = Pool("p", node_states, [(1.0, (1000, 8000, 32 * 1024), None)], reserve)
    placed = []
    probes = [((1000, 4000, 1024), None), ((500, 2000, 1024), frozenset("X")), ((0, 4000, 4096), None),
              ((2000, 1000, 1024), frozenset("Y"))]
    for shape, replicas, models, keep in ops:
        done = pool.place_gang(shape, replicas, models)
        if done is not None:
            if keep:
                placed.append((done, shape))
            else:
                for n, gpus in done:
                    pool.take(n, gpus, *shape, sign=-1)
        elif placed:
            done, old = placed.pop(0)
            for n, gpus in done:
                pool.take(n, gpus, *old, sign=-1)
        for probe, probe_models in [*probes, (shape, models)]:
            fit, sums = pool._domain_fit(probe, probe_models)
            fresh = [0 if probe_models is not None and n.model not in probe_models else pool.capacity_for(n, probe)
                     for n in pool.nodes]
            assert fit == fresh
            for level, domains in enumerate(pool.domain_nodes):
                assert sums[level] == {dom: sum(fresh[n.idx] for n in members) for dom, members in domains.items()}
        for probe_models in (None, frozenset("X"), frozenset("Y")):
            allowed = [n for n in pool.nodes if probe_models is None or n.model in probe_models]
            most = max(((sum(n.gpus), n.cpu, n.mem) for n in allowed), default=(0, 0, 0))
            assert pool.free_summary(probe_models) == (len(allowed), max(most, (0, 0, 0)))


def _pool_view(pool: Pool):
    """Everything a later placement reads: free capacity, best-fit buckets in order, the change counter."""
    return ([(list(n.gpus), n.cpu, n.mem, n.full, n.partial) for n in pool.nodes],
            [list(bucket) for bucket in pool.buckets], list(pool.partial), pool.changes, pool.free_gpu)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 4, 8]), st.integers(2, 64), st.integers(4, 256),
                          st.sampled_from("XY"), st.integers(0, 3), st.integers(0, 1)), min_size=1, max_size=10),
       st.lists(st.tuples(shape_st, st.integers(1, 6), models_st), max_size=16),
       st.lists(st.tuples(shape_st, st.integers(1, 6), models_st), min_size=1, max_size=6),
       st.sampled_from([0.0, 0.5]))
def test_a_trial_placement_leaves_the_pool_as_it_found_it(nodes, taken, probes, reserve):
    """`Pool.fits` answers as place_gang would and leaves no trace (the order of the best-fit
    buckets included, which later placements read). It answers a gang on a pool with topology
    domains from the nodes' capacities, without placing; for one replica asking for a GPU, it fits
    if and only if some node can take it (`Pool.can_take`, what preemption searches use instead
    of trials)."""
    node_states = [
        NodeState(name=f"n{i}", pool="p", allocatable=Resources(g * 1000, c * 1000, m * 1024), gpu_model=model,
                  domains=(f"block{d}", f"rack{r}"))
        for i, (g, c, m, model, d, r) in enumerate(nodes)
    ]
    # Half the mix is constrained to Y, so Y is contested where X nodes exist (whole-GPU work avoids it).
    mix = [(0.5, (1000, 8000, 32 * 1024), frozenset("Y")), (0.5, (500, 4000, 8 * 1024), None)]
    pool = Pool("p", node_states, mix, reserve)
    for shape, replicas, models in taken:
        pool.place_gang(shape, replicas, models)
    for shape, replicas, models in probes:
        before = _pool_view(pool)
        fits = pool.fits(shape, replicas, models)
        assert _pool_view(pool) == before
        if shape[0] and replicas == 1:
            assert fits == any(pool.can_take(n, shape, models) for n in pool.nodes)
        done = pool.place_gang(shape, replicas, models)
        assert (done is not None) == fits
        if done is not None:
            for n, gpus in done:
                pool.take(n, gpus, *shape, sign=-1)
