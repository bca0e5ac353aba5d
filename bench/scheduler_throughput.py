"""Benchmark a: decision throughput of one full scheduling cycle.

1,000 nodes x 8 GPUs, 10,000 pending workloads (10% gangs of 2-16 replicas, 20% fractional
GPUs), 100 projects with equal nominal quotas (borrowing allowed), on an empty cluster and on a
half-full one (5,000 running workloads, so preemption and reservations have work to do).
Baseline in the same run: a naive first-fit, priority-ordered policy (the foundation's, with no
fair share, borrowing, preemption, reservation or fragmentation scoring).

    python bench/scheduler_throughput.py [--repeat 5] [--no-record]

At scale (`--scale`): 1,250 nodes x 8 GPUs (10,000 GPUs) and 50,000 pending workloads on a
half-full cluster, Cairn's cycle and the naive first fit's alternated on the same snapshot; then
the cycle against the pending work (10,000-100,000) and the nodes (1,000-2,500), drawn in
docs/figures/scheduler_scale.png.

    python bench/scheduler_throughput.py --scale [--repeat 5] [--nodes 1250] [--pending 50000]
"""
import argparse
import os
import random
import time
from datetime import datetime, timedelta

from scheduler_common import FIGURES, command_line, machine, median, record, setup_path, timed

setup_path()
from apps.scheduling.policy import (  # noqa: E402
    Admit,
    ClusterState,
    Cycle,
    NodeState,
    PendingWorkload,
    Preempt,
    QuotaState,
    Resources,
    RunningWorkload,
    Snapshot,
    Wait,
    schedule,
)

T0 = datetime(2026, 1, 1)


def build(seed: int = 1, nodes: int = 1000, pending: int = 10_000, projects: int = 100, running: int = 0):
    rng = random.Random(seed)
    node_states = [
        NodeState(name=f"node-{i:04d}", pool="p", allocatable=Resources(8000, 96_000, 768 * 1024),
                  gpu_model="A100" if i % 4 else "H100", domains=(f"block-{i // 8}", f"rack-{i // 32}"))
        for i in range(nodes)
    ]
    names = [f"project-{i:03d}" for i in range(projects)]
    quotas = [QuotaState(project=p, pool="p", nominal=Resources(8000 * nodes // projects, 96_000 * nodes // projects,
                                                                768 * 1024 * nodes // projects))
              for p in names]

    def shape():
        kind = rng.random()
        if kind < 0.10:  # gang
            return rng.randint(2, 16), Resources(rng.choice([1000, 2000, 4000, 8000]), 8000, 64 * 1024)
        if kind < 0.30:  # fractional
            return 1, Resources(rng.choice([100, 250, 500, 700]), 2000, 8 * 1024)
        return 1, Resources(rng.choice([1000, 1000, 2000, 4000, 8000]), 8000, 32 * 1024)

    work = []
    for i in range(pending):
        replicas, per = shape()
        work.append(PendingWorkload(
            id=i + 1, project=rng.choice(names), pool="p", priority=rng.randint(0, 5),
            submitted_at=T0 + timedelta(seconds=i), replicas=replicas, per_replica=per,
            gpu_model="H100" if rng.random() < 0.05 else "",
        ))
    holders = []
    if running:
        # Fill the cluster with what the policy itself admits from another batch.
        seed_batch = build(seed + 1, nodes, running, projects)[2]
        decisions = schedule(Snapshot(node_states, quotas, seed_batch, now=T0))
        by_id = {w.id: w for w in seed_batch}
        holders = [RunningWorkload(id=10**6 + d.workload_id, project=by_id[d.workload_id].project, pool="p",
                                   priority=by_id[d.workload_id].priority, per_replica=by_id[d.workload_id].per_replica,
                                   placement=tuple(d.placement), admitted_at=T0,
                                   expected_end=T0 + timedelta(minutes=rng.randint(1, 600)))
                   for d in decisions if isinstance(d, Admit)]
    return node_states, quotas, work, holders


def naive_first_fit(snapshot: Snapshot):
    """The baseline: priority then submit order, per-project nominal only, first fit per replica."""
    free = {n.name: [n.allocatable.gpu_milli, n.allocatable.cpu_milli, n.allocatable.memory_mb]
            for n in snapshot.nodes}
    used: dict[str, list[int]] = {}
    for r in snapshot.running:
        for entry in r.placement:
            f = free[entry["node"]]
            f[0] -= r.per_replica.gpu_milli
            f[1] -= r.per_replica.cpu_milli
            f[2] -= r.per_replica.memory_mb
        u = used.setdefault(r.project, [0, 0, 0])
        for d, v in enumerate(r.per_replica.as_tuple()):
            u[d] += v * len(r.placement)
    nominal = {q.project: q.nominal.as_tuple() for q in snapshot.quotas}
    order = list(free)
    decisions = []
    for w in sorted(snapshot.pending, key=lambda w: (w.priority, w.submitted_at, w.id)):
        need = [v * w.replicas for v in w.per_replica.as_tuple()]
        u = used.setdefault(w.project, [0, 0, 0])
        if any(u[d] + need[d] > nominal[w.project][d] for d in range(3)):
            decisions.append(Wait(w.id, "quota"))
            continue
        g, c, m = w.per_replica.as_tuple()
        taken = []
        for _ in range(w.replicas):
            for name in order:
                f = free[name]
                if f[0] >= g and f[1] >= c and f[2] >= m:
                    f[0] -= g
                    f[1] -= c
                    f[2] -= m
                    taken.append(name)
                    break
            else:
                break
        if len(taken) < w.replicas:
            for name in taken:
                f = free[name]
                f[0] += g
                f[1] += c
                f[2] += m
            decisions.append(Wait(w.id, "capacity"))
            continue
        for d in range(3):
            u[d] += need[d]
        decisions.append(Admit(w.id, [{"replica": i, "node": n} for i, n in enumerate(taken)]))
    return decisions


def cycle_times(nodes: int, pending: int, repeat: int, running: float = 0.7, seed: int = 1) -> dict:
    """One half-full cluster (`running` x nodes workloads of an earlier cycle hold about half its GPUs):
    Cairn's cycle and the naive first fit's, alternated, medians of `repeat`."""
    node_states, quotas, work, holders = build(seed=seed, nodes=nodes, pending=pending, projects=100,
                                               running=int(running * nodes))
    snapshot = Snapshot(node_states, quotas, work, running=holders, now=T0)
    cairn, base, cairn_cpu, base_cpu = [], [], [], []
    decisions = None
    for _ in range(repeat):
        start = time.process_time()
        t, decisions = timed(lambda: schedule(snapshot), 1)
        cairn_cpu.append(time.process_time() - start)
        cairn += t
        start = time.process_time()
        base += timed(lambda: naive_first_fit(snapshot), 1)[0]
        base_cpu.append(time.process_time() - start)
    held = sum(r.per_replica.gpu_milli * len(r.placement) for r in holders) / (8000 * nodes)
    return {"nodes": nodes, "pending": pending, "cairn_s": median(cairn), "base_s": median(base), "held": held,
            "cairn_cpu": median(cairn_cpu), "base_cpu": median(base_cpu),
            "admitted": sum(isinstance(d, Admit) for d in decisions),
            "preempts": sum(isinstance(d, Preempt) for d in decisions)}


def kept_state(nodes: int, pending: int, repeat: int, running: float = 0.7, seed: int = 1) -> dict:
    """The cycle after the one that fills the cluster further, from the cluster state kept between
    them (the admissions applied as deltas, a tenth of the running work finished) and rebuilt: the
    time to set up the cycle's state and the whole cycle, both ways, decisions checked equal."""
    node_states, quotas, work, holders = build(seed=seed, nodes=nodes, pending=pending, projects=100,
                                               running=int(running * nodes))
    first = Snapshot(node_states, quotas, work, running=holders, now=T0)
    kept = ClusterState()
    decisions = schedule(first, cluster=kept)
    by_id = {w.id: w for w in work}
    admitted = [RunningWorkload(id=d.workload_id, project=by_id[d.workload_id].project, pool="p",
                                priority=by_id[d.workload_id].priority, per_replica=by_id[d.workload_id].per_replica,
                                placement=tuple(d.placement), admitted_at=T0 + timedelta(minutes=1))
                for d in decisions if isinstance(d, Admit)]
    gone = {d.workload_id for d in decisions if isinstance(d, Admit)}
    running_next = holders[len(holders) // 10:] + admitted  # a tenth of the earlier work finished
    second = Snapshot(node_states, quotas, [w for w in work if w.id not in gone], running=running_next,
                      now=T0 + timedelta(minutes=1))
    setup_kept, setup_rebuilt, cycle_kept, cycle_rebuilt = [], [], [], []
    for _ in range(repeat):
        trial = ClusterState()
        trial.sync(first)
        start = time.process_time()
        Cycle(second, cluster=trial)
        setup_kept.append(time.process_time() - start)
        start = time.process_time()
        Cycle(second)
        setup_rebuilt.append(time.process_time() - start)
        trial = ClusterState()
        trial.sync(first)
        start = time.process_time()
        with_kept = schedule(second, cluster=trial)
        cycle_kept.append(time.process_time() - start)
        start = time.process_time()
        rebuilt = schedule(second)
        cycle_rebuilt.append(time.process_time() - start)
        assert with_kept == rebuilt and trial.stats["rebuilds"] == 1 and trial.stats["fallbacks"] == 0
    return {"setup_kept": median(setup_kept), "setup_rebuilt": median(setup_rebuilt),
            "cycle_kept": median(cycle_kept), "cycle_rebuilt": median(cycle_rebuilt),
            "released": len(holders) // 10, "applied": len(admitted), "running": len(running_next)}


def scale(args) -> None:
    """Benchmark a at the scale of issue 31: one cycle at 1,250 nodes x 8 GPUs and 50,000 pending on a
    half-full cluster, and how the cycle grows with the queue and with the cluster."""
    main_row = cycle_times(args.nodes, args.pending, args.repeat)
    print(f"{args.nodes} nodes, {args.pending:,} pending, {main_row['held']:.0%} of the GPUs held: Cairn "
          f"{main_row['cairn_s']:.3f} s ({main_row['cairn_cpu']:.3f} s CPU), naive first fit {main_row['base_s']:.3f} s "
          f"({main_row['base_cpu']:.3f} s CPU)", flush=True)
    kept = kept_state(args.nodes, args.pending, args.repeat)
    print(f"  the next cycle ({kept['released']} finished, {kept['applied']} admitted since): state set up from the kept "
          f"state {kept['setup_kept'] * 1000:.1f} ms, rebuilt {kept['setup_rebuilt'] * 1000:.1f} ms; whole cycle "
          f"{kept['cycle_kept']:.3f} s / {kept['cycle_rebuilt']:.3f} s CPU", flush=True)
    # The first fit is alternated with Cairn's cycle on the same snapshot (cycle_times), so both see
    # the same load of the machine.
    by_pending = [cycle_times(args.nodes, p, args.sweep_repeat) for p in args.sweep_pending]
    for r in by_pending:
        print(f"  {r['nodes']} nodes {r['pending']:>7,} pending: Cairn {r['cairn_s']:.3f} s ({r['cairn_cpu']:.3f} CPU), "
              f"first fit {r['base_s']:.3f} s ({r['base_cpu']:.3f} CPU)", flush=True)
    by_nodes = [cycle_times(n, args.pending, args.sweep_repeat) for n in args.sweep_nodes]
    for r in by_nodes:
        print(f"  {r['nodes']} nodes {r['pending']:>7,} pending: Cairn {r['cairn_s']:.3f} s ({r['cairn_cpu']:.3f} CPU), "
              f"first fit {r['base_s']:.3f} s ({r['base_cpu']:.3f} CPU)", flush=True)
    if args.no_record:
        return
    figure = FIGURES / "scheduler_scale.png"
    if by_pending and by_nodes:
        draw_scale(by_pending, by_nodes, args, figure)
    lines = [
        f"### a. Decision throughput at {args.nodes * 8:,} GPUs",
        "",
        f"`{command_line()}` ({machine()}; median of {args.repeat} cycles, each followed by the naive first fit on the "
        f"same snapshot, so both see the same load of the shared machine). {args.nodes:,} nodes x 8 GPUs, "
        f"{args.pending:,} pending workloads of the mix above, 100 projects, a half-full cluster: "
        f"{int(0.7 * args.nodes):,} workloads admitted by an earlier cycle hold {main_row['held']:.0%} of the GPUs.",
        "",
        "| cluster | Cairn cycle (CPU time) | decisions/s | admitted | preemptions | naive first-fit cycle (CPU time) | "
        "Cairn / first-fit time (CPU time) |",
        "|---|---|---|---|---|---|---|",
        f"| {args.nodes:,} nodes, {args.pending:,} pending, half full | {main_row['cairn_s']:.3f} s "
        f"({main_row['cairn_cpu']:.3f} s) | {args.pending / main_row['cairn_s']:,.0f} | {main_row['admitted']:,} | "
        f"{main_row['preempts']:,} | {main_row['base_s']:.3f} s ({main_row['base_cpu']:.3f} s) | "
        f"{main_row['cairn_s'] / main_row['base_s']:.2f}x ({main_row['cairn_cpu'] / main_row['base_cpu']:.2f}x) |",
        "",
        f"Target: one cycle <= 1 s: {'met' if main_row['cairn_s'] <= 1 else 'NOT met'} in wall time in this run, "
        f"{'met' if main_row['cairn_cpu'] <= 1 else 'NOT met'} in CPU time (the time the process ran; the wall time "
        f"includes waiting for a CPU, and {os.getloadavg()[0]:.1f} processes on average wanted one of the 2 when "
        "the run ended).",
        "",
        "The cluster state kept between cycles (`policy.ClusterState`): the next cycle on the same cluster, "
        f"after {kept['released']} of the running workloads finished and the {kept['applied']:,} admissions of the "
        f"cycle above started ({kept['running']:,} running), its state set up from the state kept from the cycle above "
        "(the changes applied as deltas, the pools copied for the cycle) and rebuilt from the snapshot; "
        f"CPU time, median of {args.repeat}; the decisions are the same both ways (checked):",
        "",
        "| next cycle | state set up | whole cycle |",
        "|---|---|---|",
        f"| from the kept state | {kept['setup_kept'] * 1000:.1f} ms | {kept['cycle_kept']:.3f} s |",
        f"| rebuilt | {kept['setup_rebuilt'] * 1000:.1f} ms | {kept['cycle_rebuilt']:.3f} s |",
        "",
    ]
    if by_pending or by_nodes:
        lines += [
            f"How the cycle grows (median of {args.sweep_repeat} each; half-full clusters as above):",
            "",
            "| nodes | pending | Cairn cycle | its CPU time | naive first-fit cycle | its CPU time |",
            "|---|---|---|---|---|---|",
        ]
        for r in by_pending + by_nodes:
            lines.append(f"| {r['nodes']:,} | {r['pending']:,} | {r['cairn_s']:.3f} s | {r['cairn_cpu']:.3f} s | "
                         f"{r['base_s']:.3f} s | {r['base_cpu']:.3f} s |")
        if by_pending and by_nodes:
            lines += ["", f"![cycle time against pending workloads and nodes](figures/{figure.name})"]
    lines += ["", *SCALE_NOTES]
    record("a-scale", "\n".join(lines))


# What the profile showed and what was changed (issues 31 and 40); the figures quoted are the runs named.
SCALE_NOTES = [
    "Issue 40, third round, profiled first (cProfile of one cycle in process, and the decisions timed by kind in "
    "CPU time; the cycle above). Two findings bound what is left. (1) The 16,218 capacity-blocked waits are first "
    "decisions of their class, not repeats: only about 1,000 of the decisions of the cycle repeat a class seen "
    "blocked before (counted), so remembering blocked classes per quota state (tried: the same decisions) saves "
    "nothing; they cost what deciding each class once costs. (2) A victim search's releases and retakes are not "
    "arithmetic only: each re-files the node in the best-fit buckets, which puts it last in its bucket, and the "
    "buckets' order is the order later placements gather candidates in. A search testing the candidates' nodes "
    "without releasing them would place later work differently unless it replayed that re-filing order (and the "
    "cohort's version, which the memoised waits read); not done. Changed, decisions identical (the same digest of "
    "every decision of this cycle before and after; bench/policy_equivalence.py on a-e against the commit before): "
    "what releasing a running workload touches is worked out once per workload; a project's victim candidates are "
    "filtered of the victims taken once per change of that project's victims, not on every search; other projects' "
    "borrowed work is judged once per project (`Cohort.reclaimable_for`) instead of once per resource pattern; a "
    "queue's fair share is recomputed when its project's usage changed, not when anything in the pool did. Paired "
    "runs, CPU time, alternated with the commit before at a load of 4-8: 1.85-2.02 s before, 1.68-1.87 s after (the "
    "first fit 2.31-2.58 s in the same runs), and at a load of about 1.5: 1.65-1.94 s before, 1.52-1.75 s after "
    "(the first fit 2.13-2.34 s): about 5% less CPU by the medians of six alternated cycles each, twice, near the "
    "noise of single runs. Tried and left out: the garbage collector paused for the cycle (17% "
    "and 34% less CPU in two paired runs under load), because the policy package imports computation-only modules "
    "by rule (tests/scheduling/test_policy_package.py); the service could pause it around its call. Still NOT "
    "met; what 1 s needs: the victim search without releases, with the re-filing order replayed, and less work per "
    "workload in the ordering and the memoised waits (about 0.5 s of the cycle decides nothing new: the ordering "
    "alone takes 0.31 s of CPU).",
    "",
    'Issue 40, second round, profiled first (cProfile of one cycle at 2,500 nodes, 100,000 pending, half full, and '
    'the decisions timed by kind in CPU time): the 1,276 successful preemption searches took about 37% of the cycle'
    ' (each releases candidates one by one in victim order until the preemptor fits, then gives back those not '
    "needed; releasing and retaking candidates is about a fifth of it, and the other projects' borrowed work is "
    'gathered for each), the 16,218 capacity-blocked waits decided afresh after a change of the pool about 21%, '
    "ordering the 100,000 workloads about 14%, the 1,983 admissions' placements about 10%, setting up the state 3%;"
    ' the 17,382 failed victim searches cost little (15,447 of them have no candidate at all). Changed, decisions '
    'identical (the same digest of every decision of this cycle before and after, and bench/policy_equivalence.py):'
    ' the quota arithmetic behind every admission, victim release and quota check inlined (no per-dimension method '
    "calls; a reason built only when something blocks), and a gang's trial on a pool with topology domains reads a "
    "running total of the nodes' capacities instead of summing 2,500 nodes. Under the load of this round (25-35 "
    'processes wanting the 2 CPUs) the gain is within the noise of the CPU times (A/B runs alternated: 2.4-2.9 s '
    "either way); a run at that load gave the first round's figures again (2.17 s against the first fit's 2.88 s), "
    'and the table above was measured when the load had dropped to about 5 (1.76 s against 2.11 s; the first '
    "round's 2.17 s against 2.90 s was at a load of 25-30). Tried and left out: dropping chosen victims from the "
    'kept candidate lists instead of filtering them out on each search (the same decisions, no gain measurable); '
    "the cycle with Python's garbage collector off (7-8% less CPU in paired runs; a process-wide switch, not made)."
    " Not done, and what 1 s needs: a victim search for one replica that tests the nodes of the candidates' "
    'placements without releasing and retaking each candidate, and a cheaper re-decision for classes blocked on '
    'capacity (each pays the quota check, the failed-search lookups and a new capacity reason).',
    "",
    "Issue 40, profiled first (cProfile of one cycle at 2,500 nodes, 100,000 pending, half full): the cycle had gro"
    "wn to about 9 s against the first fit's 2 s, 10.6 of the 18.3 profiled seconds in the never-fits check added s"
    "ince issue 31 (`_Reasons._never_fits` built a list over every node of the pool for each of the 20,641 workload"
    "s decided). It now asks the pool's distinct node sizes per GPU model, memoised per (pool, models, shape) for t"
    "he cycle, and builds the reason from the nodes only when a replica never fits; the decisions are identical (be"
    "nch/policy_equivalence.py, Policy refactors below). What the profile shows after it (per decided workload, tim"
    "ed): the 1,276 successful preemption searches about a third of the cycle (other projects' borrowed work gather"
    "ed for each, victims released and retaken for the minimal set, the preemptor's plan held), ordering the 100,00"
    "0 workloads about a fifth, the 1,983 admissions' placements and the 16,218 capacity-blocked waits decided afre"
    "sh after each change of the pool about 15% each. What is left to reach 1 s is spread over these; nothing like "
    "the never-fits list remains.",
    "",
    "Profile first (cProfile of one cycle at 1,250 nodes, 50,000 pending, half full; before the changes the "
    "cycle took 2.14 s against the naive first fit's 1.06 s on a quiet machine). Of the cycle, 36% went to "
    "gangs' topology-domain search (`Pool._domain_groups`: for each trial placement of a multi-replica "
    "workload, the capacity of every node summed per domain, 1.7 million node visits for 859 trials), most of "
    "the rest to preemption victim searches (each releases candidates one by one and tries the placement) and "
    "to placement scoring, which placed and removed each candidate to score it, re-filing the node in the "
    "best-fit index twice. Building the cycle's state (pools with running work applied, quota cohorts) was "
    "0.025 s and ordering the queue 0.14 s: the decisions are the cost, not the snapshot.",
    "",
    "Changed, each checked with bench/policy_equivalence.py (identical decisions and placements on a, b and "
    "d): per-domain capacities kept per gang shape and brought up to date from a log of the nodes that changed "
    "since the last look (a trial now costs the nodes it touched); scoring computes a candidate's waste on the "
    "node alone and keeps the candidate order that placing and removing it gave; the most-free-node summary "
    "behind capacity reasons kept the same way; waste memoised on the node's free capacity; other projects' "
    "reclaimable work grouped once per cycle by the resources it uses; victims taken from a heap instead of a "
    "full sort; quota arithmetic and the ordering key without per-call builtins. The cycle went to about the "
    "naive first fit's time. " + (
        "On a quiet machine (load average 0.3) after the first two of these changes the cycle took 1.12 s against the "
        "first fit's 1.03 s; the rest were measured in CPU time under load (about 1.24 s before them, 0.97-1.02 s "
        "after, the first fit 1.01-1.16 s in the same runs). Under load CPU times are inflated too (shared "
        "caches): compare the Cairn and first-fit columns of one run, not a run with the 1 s line."),
    "",
    "Snapshots kept between cycles (`policy.ClusterState`, issue 31): the pools' free capacity with the running "
    "work applied is kept from one cycle to the next and brought up to date by the changes (workloads that "
    "ended give back what they held, new or moved ones take theirs, a pool whose nodes changed is rebuilt), with "
    "a rebuild as the fallback (a placement without valid GPU indices). To make both give the same decisions, "
    "a cycle now starts from the nodes filed in node order in the best-fit buckets, kept or rebuilt, instead of "
    "in the order the running work was applied in (which the database does not fix); "
    "tests/scheduling/test_cluster_state.py checks it over random sequences of admissions, finishes, "
    "preemptions and node changes. It does not make this cycle shorter, as the table above shows: setting up the "
    "state is a few per cent of the cycle either way (the task mix over the whole queue, the quota cohorts and "
    "the preemption candidates are worked out per cycle from the snapshot, and the pools are copied for the "
    "cycle, which changes them). What the service would gain most from, reading only the changed rows from "
    "PostgreSQL instead of every queued workload, it does not do yet: the scheduler still reads the whole "
    "snapshot and the kept state is brought up to date by comparing it with the snapshot.",
    "",
    "Where the cycle went before the second round of issue 31 (py-spy, 6 cycles): preemption searches 51% (victim "
    "searches 33%, of which trial placements 21% and releasing and retaking candidates 8%; other projects' borrowed "
    "work 8.5%), ordering the queue 14%, placing admissions 10%. Of the 50,000 workloads, 13,286 are decided (the "
    "rest get the memoised wait of their class; 11,006 classes) and 12,170 of those search for victims, 10,438 "
    "finding no candidate at all (cheap: no release, no trial); 242 searches failed after releasing candidates, "
    "with 483 trials between them, and 848 succeeded with 8,363, most of them for one replica asking for a GPU.",
    "",
    "Changed then, each checked with bench/policy_equivalence.py against the commit before it: (1) a trial "
    "placement leaves the pool exactly as it found it (`Pool.fits` puts back the best-fit buckets it re-filed, "
    "and the change counter), so whether a trial runs no longer changes later placements; against the policy "
    "before, the decisions are identical on a, b, c and d and on this benchmark's cycles at 1,250 and 2,500 nodes "
    "(only the trial placements asked on the way differ); (2) a victim search for one replica asking for a GPU "
    "answers from the nodes instead of trying: such a replica fits if and only if some node can take it "
    "(`Pool.can_take`), and a node only gains capacity as candidates are released, so once a trial found none, "
    "only the nodes of candidates released since are looked at; (3) a gang's trial on a pool with topology "
    "domains is answered from the nodes' capacities for its shape, which `_domain_fit` keeps up to date: a "
    "replica placed on a node lowers that node's capacity by exactly one, so a set of nodes takes the gang if and "
    "only if their capacities add up to its replicas (trial placements left at 1,250 nodes: 8,850 -> 250, at "
    "2,500 nodes 29,900 -> 0); (4) less per-workload work in the ordering (cohort and quota resolved once per "
    "queue, no memo dicts for values used once, heappushpop; the ordering alone 0.15 s -> 0.095 s), victim-order "
    "entries built once per project, cheaper candidate gathering. Measured in CPU time, 5 cycles each, under the "
    "same load (about 1.5) for both: 1.03 s before against the first fit's 1.06 s; after (1), (2) and (4) 0.78 s "
    "against 1.02 s; (3) took a further 10% off in paired runs (0.86 s -> 0.77 s at a load of about 2).",
    "",
    "Where the cycle goes now (py-spy, 6 cycles): preemption searches 35% (victim searches 18%, of which trial "
    "placements 4% and releasing and retaking candidates 6%; other projects' borrowed work 7%; holding the "
    "preemptor's plan 4%), ordering the queue 19%, placing admissions 14%, quota checks 9% (mostly the reasons of "
    "the waits), setting up the state 3%, capacity reasons 3%. Not done: a first trial with every candidate "
    "released (failed searches cost little, above) and caching failures for dominated asks (10,438 of the "
    "searches have no candidate and cost little as they are). What is left is spread over per-workload work "
    "(ordering, memoised waits) and the decisions themselves; the cycle stays linear in the queue. It still "
    "grows faster with nodes than the first fit (the table above): a bigger half-full cluster admits and "
    "preempts more of the queue before it is full, and every admission and preemption is a placement.",
]


def draw_scale(by_pending, by_nodes, args, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, rows, key, label in ((left, by_pending, "pending", f"pending workloads ({args.nodes:,} nodes)"),
                                 (right, by_nodes, "nodes", f"nodes x 8 GPUs ({args.pending:,} pending)")):
        xs = [r[key] for r in rows]
        ax.plot(xs, [r["cairn_cpu"] for r in rows], "o-", label="Cairn")
        ax.plot(xs, [r["base_cpu"] for r in rows], "s--", label="naive first fit")
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xlabel(label)
        ax.set_ylabel("one cycle, CPU time (s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Scheduling cycle on a half-full cluster")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", action="store_true",
                        help="the 10,000-GPU cycle and its growth with pending work and nodes (block a-scale, figure)")
    parser.add_argument("--nodes", type=int, default=1250, help="with --scale")
    parser.add_argument("--pending", type=int, default=50_000, help="with --scale")
    parser.add_argument("--sweep-pending", type=int, nargs="*", default=[10_000, 25_000, 50_000, 75_000, 100_000])
    parser.add_argument("--sweep-nodes", type=int, nargs="*", default=[1000, 1500, 2000, 2500])
    parser.add_argument("--sweep-repeat", type=int, default=1)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.scale:
        scale(args)
        return
    rows = []
    for label, running in (("empty cluster", 0), ("half-full cluster (running work of an earlier cycle)", 700)):
        nodes, quotas, pending, holders = build(running=running)
        snapshot = Snapshot(nodes, quotas, pending, running=holders, now=T0)
        cairn_times, decisions = timed(lambda snapshot=snapshot: schedule(snapshot), args.repeat)
        base_times, base_decisions = timed(lambda snapshot=snapshot: naive_first_fit(snapshot), args.repeat)
        admitted = [d for d in decisions if isinstance(d, Admit)]
        gpus = sum(len(d.placement) for d in admitted)
        per_id = {w.id: w for w in pending}
        gpu_milli = sum(per_id[d.workload_id].per_replica.gpu_milli * per_id[d.workload_id].replicas for d in admitted)
        base_gpu = sum(per_id[d.workload_id].per_replica.gpu_milli * per_id[d.workload_id].replicas
                       for d in base_decisions if isinstance(d, Admit))
        preempts = sum(isinstance(d, Preempt) for d in decisions)
        row = {
            "label": label, "cairn_s": median(cairn_times), "base_s": median(base_times),
            "decisions": len(pending), "admitted": len(admitted), "replicas": gpus, "gpu": gpu_milli / 1000,
            "base_gpu": base_gpu / 1000, "preempts": preempts, "running": len(holders),
        }
        rows.append(row)
        print(f"{label}: Cairn cycle median {row['cairn_s']:.3f} s ({len(pending) / row['cairn_s']:,.0f} decisions/s), "
              f"admitted {len(admitted)} workloads = {row['gpu']:,.0f} GPUs, {preempts} preemptions; "
              f"naive first fit {row['base_s']:.3f} s, {row['base_gpu']:,.0f} GPUs")
    if args.no_record:
        return
    lines = [
        "### a. Decision throughput",
        "",
        f"`{command_line()}` ({machine()}; median of {args.repeat} cycles). 1,000 nodes x 8 GPUs, 10,000 pending "
        "workloads (10% gangs of 2-16 replicas, 20% fractional), 100 projects. One cycle = `schedule(snapshot)`, "
        "a decision for each of the 10,000 workloads.",
        "",
        "| cluster | Cairn cycle | decisions/s | admitted (GPUs) | preemptions | naive first-fit cycle | its GPUs | "
        "Cairn / first-fit time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['cairn_s']:.3f} s | {r['decisions'] / r['cairn_s']:,.0f} | {r['admitted']:,} "
            f"({r['gpu']:,.0f}) | {r['preempts']} | {r['base_s']:.3f} s | {r['base_gpu']:,.0f} | "
            f"{r['cairn_s'] / r['base_s']:.1f}x |")
    lines += ["", "Target: one cycle <= 1 s. Anchors (not measured here): kube-scheduler's CI floor with extended "
              "resources is 180 pods/s; Kueue admits one workload per queue per cycle."]
    record("a", "\n".join(lines))


if __name__ == "__main__":
    main()
