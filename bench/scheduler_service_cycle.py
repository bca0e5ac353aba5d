"""Benchmark: the whole scheduling service cycle on PostgreSQL, read / decide / write.

`apps.scheduling.services.scheduling_cycle()` end to end, as the scheduler process runs it: the
leader lock and the deployments' autoscaler, the snapshot read from PostgreSQL (nodes, quotas,
running work, each project's service, the queued workloads, their dataset caches), the policy's
decisions, and the writes (admissions through the compare-and-set transition with their events,
preemptions, the waits whose kind or reason class changed and those whose figures are past the
freshness bound (CAIRN_WAIT_REFRESH_SECONDS), in bulk, and each pool's queue order, one row per
pool). Wall time and CPU time: the scheduler process's per part, and that of the PostgreSQL backend
serving it (from /proc: the server runs on the same machine).

The cluster and queue are benchmark a's (bench/scheduler_throughput.py `build`): `--nodes` x 8 GPUs
(rack and block labels as topology), 100 projects with equal quotas, a half-full cluster (the
admissions of an earlier batch, running) and `--pending` queued workloads. Then:

- the first cycle, from a cold process (every queued row read in full);
- then, untimed, the waits' texts are given ages spread evenly over the freshness bound, as in a
  scheduler that has run longer than the bound (each cycle refreshes the share that aged past it),
  and one cycle reads them again;
- `--repeat` steady cycles: before each, a tenth of the running work finishes and `--submit` new
  workloads are queued, as between two cycles of a busy scheduler; each cycle reads in full only the
  queued rows that changed since the last (their xmin moved);
- in the same run, the baseline: the same steady cycle with the kept copy dropped first, so that
  it reads every queued row in full.

    scripts/with-test-services.sh .venv/bin/python bench/scheduler_service_cycle.py [--nodes 1250]
        [--pending 50000] [--repeat 5] [--no-record]

Needs DATABASE_URL (scripts/with-test-services.sh starts a throw-away PostgreSQL); it migrates that
database and fills it. Recorded in docs/benchmarks.md (block scheduler:service-cycle).
"""
import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta

from scheduler_common import command_line, machine, record, setup_path

setup_path()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("CAIRN_MODE", "server")


def populate(nodes: int, pending: int, seed: int = 1) -> dict:
    import scheduler_throughput as a
    from django.db import connection
    from django.utils import timezone

    from apps.clusters.models import Cluster, Node, ResourcePool
    from apps.projects.models import Project
    from apps.quotas.models import Quota
    from apps.workloads.models import Workload

    node_states, quotas, work, holders = a.build(seed=seed, nodes=nodes, pending=pending, projects=100,
                                                 running=int(0.7 * nodes))
    cluster = Cluster.objects.create(name="bench", backend="local")
    pool = ResourcePool.objects.create(cluster=cluster, name="p", topology_keys=["cairn.dev/block", "cairn.dev/rack"])
    Node.objects.bulk_create([
        Node(cluster=cluster, pool=pool, name=n.name, cpu_milli_capacity=n.allocatable.cpu_milli,
             cpu_milli_allocatable=n.allocatable.cpu_milli, memory_mb_capacity=n.allocatable.memory_mb,
             memory_mb_allocatable=n.allocatable.memory_mb, gpu_count=n.allocatable.gpu_milli // 1000,
             gpu_model=n.gpu_model, accelerator_type="nvidia", health="healthy", schedulable=True,
             labels={"cairn.dev/block": n.domains[0], "cairn.dev/rack": n.domains[1]}, last_seen_at=timezone.now())
        for n in node_states])
    projects = {q.project: Project.objects.create(slug=q.project, name=q.project) for q in quotas}
    Quota.objects.bulk_create([
        Quota(project=projects[q.project], pool=pool, nominal_gpu_milli=q.nominal.gpu_milli,
              nominal_cpu_milli=q.nominal.cpu_milli, nominal_memory_mb=q.nominal.memory_mb) for q in quotas])
    now = timezone.now()
    start = now - timedelta(hours=2)

    def row(w, **extra):
        return Workload(project=projects[w.project], pool=pool, kind="training", name=f"w{w.id}",
                        spec={"command": ["true"]}, priority=w.priority, replicas=extra.pop("replicas", None) or
                        getattr(w, "replicas", 1), gpu_milli=w.per_replica.gpu_milli, cpu_milli=w.per_replica.cpu_milli,
                        memory_mb=w.per_replica.memory_mb, gpu_model=getattr(w, "gpu_model", None) or "", **extra)

    running = [row(r, replicas=len(r.placement), status="running", placement=list(r.placement), admitted_at=start,
                   started_at=start) for r in holders]
    queued = [row(w, status="queued") for w in work]
    for batch in range(0, len(running), 5000):
        Workload.objects.bulk_create(running[batch:batch + 5000])
    for batch in range(0, len(queued), 5000):
        Workload.objects.bulk_create(queued[batch:batch + 5000])
    # Submission times spread over the last two hours, in the benchmark's order.
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Workload._meta.db_table} SET created_at = %s + (id * interval '0.1 second')",
                       [start])
        cursor.execute("VACUUM ANALYZE")
    return {"pool": pool, "projects": list(projects.values()), "work": work, "running": len(running)}


_SUBMITTED = [0]


def churn(state: dict, rng: random.Random, submit: int) -> tuple[int, int]:
    """Between two cycles: a tenth of the running work finishes, `submit` new workloads are queued."""
    from django.utils import timezone

    from apps.workloads.models import Workload

    now = timezone.now()
    running = list(Workload.objects.filter(status="running").values_list("id", flat=True))
    done = rng.sample(running, len(running) // 10)
    Workload.objects.filter(pk__in=done).update(status="succeeded", finished_at=now, updated_at=now)
    # Admitted work starts running (the backend's part), so it holds its place as running work.
    Workload.objects.filter(status="admitted").update(status="running", started_at=now, updated_at=now)
    shapes = rng.sample(state["work"], submit)
    _SUBMITTED[0] += submit
    Workload.objects.bulk_create([
        Workload(project=rng.choice(state["projects"]), pool=state["pool"], kind="training",
                 name=f"new{_SUBMITTED[0] + i}",
                 spec={"command": ["true"]}, priority=w.priority, replicas=w.replicas, gpu_milli=w.per_replica.gpu_milli,
                 cpu_milli=w.per_replica.cpu_milli, memory_mb=w.per_replica.memory_mb, gpu_model=w.gpu_model,
                 status="queued")
        for i, w in enumerate(shapes)])
    return len(done), submit


def backend_cpu() -> float:
    """CPU seconds the PostgreSQL backend serving this connection has used (it runs on this machine)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def one_cycle(cold: bool = False) -> dict:
    from apps.scheduling import services

    if cold:  # the baseline: every queued row read in full, as before the kept copy
        services._INPUTS.rows = {}
    pg = backend_cpu()
    began = time.perf_counter()
    cpu = time.process_time()
    result = services.scheduling_cycle()
    total = time.perf_counter() - began
    cpu = time.process_time() - cpu
    pg = backend_cpu() - pg
    return {"total": total, "cpu": cpu, "pg_cpu": pg, "all_cpu": cpu + pg, **result.timings,
            "admitted": result.admitted, "preempted": result.preempted, "waiting": result.waiting,
            "written": result.waits_written, "refreshed": result.waits_refreshed, "read_rows": result.queued_read}


def spread_wait_ages() -> float:
    """The queued waits' pending_reason_at spread evenly (by id, deterministic) over the last
    freshness bound; returns the bound."""
    from django.db import connection

    from apps.scheduling.services import wait_refresh_seconds
    from apps.workloads.models import Workload

    bound = wait_refresh_seconds()
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Workload._meta.db_table} SET pending_reason_at = now() - "
                       "((id * 7919) %% 1000) / 1000.0 * %s * interval '1 second' WHERE status = 'queued'", [bound])
    return bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1250)
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--submit", type=int, default=500, help="workloads queued between two steady cycles")
    parser.add_argument("--profile", action="store_true", help="cProfile one more steady cycle (printed, not recorded)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("needs PostgreSQL: scripts/with-test-services.sh .venv/bin/python bench/scheduler_service_cycle.py")
    _create_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    state = populate(args.nodes, args.pending)
    print(f"filled: {args.nodes} nodes, {state['running']} running, {args.pending:,} queued "
          f"({time.perf_counter() - began:.0f} s)", flush=True)
    rng = random.Random(7)
    first = one_cycle()
    print(_line("first cycle (cold)", first), flush=True)
    bound = spread_wait_ages()
    print(_line(f"waits' ages spread over {bound:g} s, read again (untimed)", one_cycle()), flush=True)
    steady, full = [], []
    for i in range(args.repeat):
        churn(state, rng, args.submit)
        steady.append(one_cycle())
        print(_line(f"steady {i + 1}", steady[-1]), flush=True)
        churn(state, rng, args.submit)
        full.append(one_cycle(cold=True))
        print(_line(f"full read {i + 1}", full[-1]), flush=True)
    if args.profile:
        import cProfile
        import pstats

        churn(state, rng, args.submit)
        profile = cProfile.Profile()
        profile.runcall(one_cycle)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    if args.no_record:
        return
    med = {k: statistics.median(r[k] for r in steady) for k in steady[0]}
    base = {k: statistics.median(r[k] for r in full) for k in full[0]}
    lines = [
        "### Service cycle on PostgreSQL: read, decide, write",
        "",
        f"`scripts/with-test-services.sh .venv/bin/{command_line()}` ({machine()}; PostgreSQL "
        f"{_pg_version()} from scripts/with-test-services.sh, fsync off, on the same machine). "
        f"`scheduling_cycle()` end to end on benchmark a's cluster and queue: {args.nodes:,} nodes x 8 GPUs, "
        f"{state['running']:,} running workloads holding about half the GPUs, {args.pending:,} queued, 100 projects. "
        f"Steady cycles: before each, a tenth of the running work finished and {args.submit} workloads were "
        f"queued; medians of {args.repeat}. Before them, the waits' texts were given ages spread evenly over "
        f"the freshness bound (CAIRN_WAIT_REFRESH_SECONDS, {bound:g} s), as in a scheduler running for longer "
        "than that: a wait is written when its kind or reason class changes, and its figures once past the "
        "bound (the refreshed ones, at most twice the share of the queue that ages past it between two "
        "cycles). Full read: the same, with the process's kept copy of the queue "
        "dropped first (every queued row read in full), alternated with the steady ones.",
        "",
        "| cycle | whole cycle | read | decide | write | CPU time, all | scheduler's CPU: read / decide / write | "
        "PostgreSQL's CPU | queued rows read | admitted | preempted | waits written (refreshed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        _row("first cycle (cold process)", first),
        _row("steady (rows changed since the last cycle)", med),
        _row("steady, full read (baseline)", base),
        "",
        f"Target: the whole cycle <= 2 s at 1,250 nodes and 50,000 pending: "
        f"{'met' if med['total'] <= 2 else 'NOT met'} in wall time by the steady cycle ({med['total']:.2f} s), "
        f"{'met' if med['all_cpu'] <= 2 else 'NOT met'} in CPU time ({med['all_cpu']:.2f} s: the scheduler "
        "process's, and that of the PostgreSQL backend serving it, read from /proc). "
        f"The load average was {os.getloadavg()[0]:.1f} on the 2 CPUs when the run ended (PostgreSQL shares them).",
    ]
    record("service-cycle", "\n".join(lines))


def _create_database(url: str) -> None:
    """The database DATABASE_URL names, created if missing (with-test-services.sh starts a bare server)."""
    from urllib.parse import urlsplit

    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _line(label: str, r: dict) -> str:
    return (f"{label}: {r['total']:.2f} s (read {r['read']:.2f}, decide {r['decide']:.2f}, write {r['write']:.2f}); "
            f"CPU {r['all_cpu']:.2f} s = scheduler {r['cpu']:.2f} (read {r['read_cpu']:.2f}, decide "
            f"{r['decide_cpu']:.2f}, write {r['write_cpu']:.2f}) + PostgreSQL {r['pg_cpu']:.2f}; "
            f"{r['read_rows']:,} queued rows read, {r['admitted']} admitted, {r['preempted']} preempted, "
            f"{r['written']:,} waits written ({r['refreshed']:,} refreshed)")


def _row(label: str, r: dict) -> str:
    return (f"| {label} | {r['total']:.2f} s | {r['read']:.2f} s | {r['decide']:.2f} s | {r['write']:.2f} s | "
            f"{r['all_cpu']:.2f} s | {r['read_cpu']:.2f} / {r['decide_cpu']:.2f} / {r['write_cpu']:.2f} s | "
            f"{r['pg_cpu']:.2f} s | {r['read_rows']:,.0f} | {r['admitted']:,.0f} | {r['preempted']:,.0f} | "
            f"{r['written']:,.0f} ({r['refreshed']:,.0f}) |")


def _pg_version() -> str:
    from django.db import connection

    return ".".join(str(connection.pg_version // 10000 ** i % 100) for i in (1, 0))


if __name__ == "__main__":
    sys.exit(main())
