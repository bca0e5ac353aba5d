"""Replay a workload trace through the scheduling policy with simulated time.

    manage.py simulate                                # alibaba-gpu-2023, Cairn vs strict FIFO
    manage.py simulate --nodes 20 --chart sim.png     # a 20-node sample of the cluster, with a chart
    manage.py simulate --from-db gpu-a100 --days 14 --quota vision=16:8   # try a quota change first

See docs/scheduling.md.
"""
import dataclasses
import json
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from apps.clusters.models import ResourcePool
from apps.scheduling.datasim import DatasetCacheModel
from apps.scheduling.policy import (
    DEFAULT_GPU_NODE_RESERVE,
    DEFAULT_LOCALITY_WAIT_SECONDS,
    DEFAULT_REPREEMPT_MIN_RUNTIME,
    DEFAULT_SERVICE_HALF_LIFE,
    DEFAULT_STARVATION_SECONDS,
    DEFAULT_TIMESLICE_SECONDS,
    SERVICE_OPTIONS,
    WAIT_KIND_LABELS,
    QuotaState,
    Resources,
)
from apps.scheduling.services import scheduling_snapshot
from apps.scheduling.simulation import (
    ALIBABA_TRACE_DIR,
    FIFO_WAIT,
    NOT_YET_DECIDED,
    SimJob,
    chart,
    equal_quotas,
    load_alibaba_nodes,
    load_alibaba_tasks,
    mixed_cluster,
    per_type,
    simulate,
)
from apps.workloads.models import Workload

DEFAULT_TRACE_DIR = ALIBABA_TRACE_DIR
TASK_LISTS = {"default": "openb_pod_list_default.csv", "gpuspec33": "openb_pod_list_gpuspec33.csv"}
WAIT_LABELS = {**WAIT_KIND_LABELS, NOT_YET_DECIDED: "not yet decided", FIFO_WAIT: "fifo"}  # table headings
METRICS = [
    ("utilisation", "utilisation (allocated GPU-time / capacity-time, arrival window)", "{:.1%}"),
    ("utilisation_makespan", "utilisation until the last job finished (or --time-limit)", "{:.1%}"),
    ("allocation_rate", "GPU allocation rate while work waits", "{:.1%}"),
    ("avg_queue_delay", "average queueing delay (s)", "{:,.0f}"),
    ("p99_queue_delay", "p99 queueing delay (s)", "{:,.0f}"),
    ("avg_jct", "average job completion time (s)", "{:,.0f}"),
    ("preemptions", "preemptions", "{}"),
    ("preemptions_within_project", "  by the same project's higher priority", "{}"),
    ("preempted_gpu_hours", "GPU-hours preempted jobs had run", "{:,.1f}"),
    ("redone_gpu_hours", "  of which lost and run again", "{:,.1f}"),
    ("most_preemptions", "most preemptions of one job", "{}"),
    ("fairness", "fairness, slowdown (Jain's index over projects of GPU-time used / spent)", "{:.3f}"),
    ("share_fairness", "fairness, share (Jain's index over projects of GPU-time held / max-min fair)", "{:.3f}"),
    ("finished", "jobs finished", "{}"),
    ("cycles", "scheduling cycles", "{}"),
]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _parse_quota(text: str) -> tuple[str, float, float | None, float | None]:
    """PROJECT=NOMINAL[:BORROW[:LEND]] in GPUs ('-' or empty: no limit)."""
    try:
        project, numbers = text.split("=", 1)
        parts = numbers.split(":")
        values = [None if p in ("", "-") else float(p) for p in parts] + [None, None]
        if values[0] is None or not project:
            raise ValueError
        return project, values[0], values[1], values[2]
    except ValueError:
        raise CommandError(f"--quota {text!r}: expected PROJECT=GPUS[:BORROW[:LEND]], e.g. vision=16:8") from None


class Command(BaseCommand):
    help = "Replay a trace (alibaba-gpu-2023, or this installation's own history) through the scheduler."

    def add_arguments(self, parser):
        parser.add_argument("--trace-dir", default=str(DEFAULT_TRACE_DIR))
        parser.add_argument("--tasks", default="default", help="default | gpuspec33 | a path to a pod list CSV")
        parser.add_argument("--nodes-file", default="openb_node_list_gpu_node.csv")
        parser.add_argument("--nodes", type=int, help="Use an evenly spread sample of this many nodes.")
        parser.add_argument("--limit", type=int, help="Replay only the first N tasks.")
        parser.add_argument("--time-scale", type=float, default=1.0,
                            help="Compress arrivals by this factor (durations unchanged) to raise the load.")
        parser.add_argument("--projects", type=int, default=8, help="Projects the trace's pods are spread over.")
        parser.add_argument("--seed", type=int, default=0,
                            help="Which assignment of the trace's pods to projects (a seeded hash of their names).")
        parser.add_argument("--borrowing-limit", type=float, help="GPUs each project may borrow (default: any).")
        parser.add_argument("--from-db", metavar="POOL",
                            help="Nodes, quotas and the last --days of workloads of this pool, from the database.")
        parser.add_argument("--days", type=float, default=7.0)
        parser.add_argument("--quota", action="append", default=[], metavar="PROJECT=GPUS[:BORROW[:LEND]]",
                            help="Override (or add) a project's quota for the simulation; repeatable.")
        parser.add_argument("--policy", choices=["cairn", "fifo", "both"], default="both")
        parser.add_argument("--cycle-interval", type=float, default=0.0, help="Simulated seconds between cycles.")
        parser.add_argument("--grace", type=float, default=30.0, help="Grace period of preempted jobs (s).")
        parser.add_argument("--repreempt-min-runtime", type=float, default=DEFAULT_REPREEMPT_MIN_RUNTIME,
                            help="Seconds a job preempted before must run after its re-admission before another "
                                 "project may reclaim it again (0: off).")
        parser.add_argument("--starvation-seconds", type=float, default=DEFAULT_STARVATION_SECONDS,
                            help="Bounded wait: a job pending this long goes before newer work of any priority "
                                 "(0: strict priority order).")
        parser.add_argument("--timeslice", type=float, default=DEFAULT_TIMESLICE_SECONDS, metavar="SECONDS",
                            help="Time slice: past the bounded wait, work asking for 2 GPUs or more may preempt its "
                                 "own project's work of the same priority that has run this long (0: off).")
        parser.add_argument("--service-half-life", type=float, default=DEFAULT_SERVICE_HALF_LIFE, metavar="SECONDS",
                            help="Half-life of each project's service ratio, which orders work past the bounded "
                                 "wait (worst served first).")
        parser.add_argument("--gpu-node-reserve", type=float, default=DEFAULT_GPU_NODE_RESERVE,
                            help="Share (0-1) of free GPUs' part of a node's CPU and memory kept for GPU work.")
        parser.add_argument("--checkpoint-every", type=float, metavar="SECONDS",
                            help="Preempted jobs keep only the work up to their last checkpoint, taken this often "
                                 "('inf': never, they start over). Default: they checkpoint at SIGTERM and lose "
                                 "nothing.")
        parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                            help="Stop after this much simulated time (a replay that does not settle, e.g. jobs "
                                 "that never checkpoint preempted again and again); figures cover what ran.")
        parser.add_argument("--unknown-durations", action="store_true",
                            help="Do not tell the policy how long jobs run (no start estimates for reservations).")
        parser.add_argument("--mixed", metavar="SHARE[:TYPE[:MODEL[:ARCH]]]",
                            help="Relabel this share of the nodes (and of the GPU jobs) as another accelerator type "
                                 "and CPU architecture, default ascend:910B:arm64 (the rest: nvidia on amd64), and "
                                 "report utilisation and waits per type. See docs/accelerators.md.")
        parser.add_argument("--datasets", type=int, metavar="N",
                            help="Jobs read one of N datasets (Zipf popularity, an assumption: the trace has none) "
                                 "through LRU node caches; prints the cache hit rate with and without data-aware "
                                 "placement (apps/scheduling/datasim.py).")
        parser.add_argument("--dataset-gb", type=float, default=50.0, help="Size of each dataset (with --datasets).")
        parser.add_argument("--cache-gb", type=float, default=200.0, help="Each node's cache (with --datasets).")
        parser.add_argument("--locality-wait", type=float, nargs="+", default=[DEFAULT_LOCALITY_WAIT_SECONDS],
                            metavar="SECONDS",
                            help="With --datasets: delay scheduling's bound (a job waits up to this long for a node "
                                 "holding its dataset), one replay per value; 0 for none.")
        parser.add_argument("--chart", help="Write a PNG chart here (needs matplotlib).")
        parser.add_argument("--json", action="store_true", help="Print the metrics as JSON.")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **opts):
        if not opts["timeslice"] >= 0:
            raise CommandError(f"--timeslice {opts['timeslice']:g}: expected 0 (off) or a positive number of seconds.")
        if not opts["service_half_life"] > 0:
            raise CommandError(f"--service-half-life {opts['service_half_life']:g}: expected a positive number of "
                               "seconds.")
        if not 0.0 <= opts["gpu_node_reserve"] <= 1.0:
            raise CommandError(f"--gpu-node-reserve {opts['gpu_node_reserve']:g}: expected a share from 0 to 1.")
        if opts["time_limit"] is not None and not opts["time_limit"] > 0:
            raise CommandError(f"--time-limit {opts['time_limit']:g}: expected a positive number of seconds.")
        if opts["checkpoint_every"] is not None and not opts["checkpoint_every"] > 0:
            raise CommandError(f"--checkpoint-every {opts['checkpoint_every']:g}: expected a positive number of "
                               "seconds, or 'inf' for jobs that never checkpoint.")
        if opts["from_db"]:
            nodes, quotas, jobs = self._from_db(opts["from_db"], opts["days"])
        else:
            nodes, quotas, jobs = self._from_trace(opts)
        if not jobs:
            raise CommandError("No jobs to replay.")
        if not nodes:
            raise CommandError("No nodes to schedule on.")
        pool = nodes[0].pool
        quotas = self._override(quotas, opts["quota"], pool)
        types = None
        if opts["mixed"]:
            nodes, jobs, node_types, job_types = self._mixed(nodes, jobs, opts["mixed"])
            types = (node_types, job_types)
        gpus = sum(n.allocatable.gpu_milli for n in nodes) / 1000
        policies = ["fifo", "cairn"] if opts["policy"] == "both" else [opts["policy"]]
        # The settings the service reads from CAIRN_*, from the flags (the rest as the service has them).
        options = dataclasses.replace(
            SERVICE_OPTIONS, repreempt_min_runtime_seconds=opts["repreempt_min_runtime"],
            starvation_seconds=opts["starvation_seconds"], gpu_node_reserve=opts["gpu_node_reserve"],
            timeslice_seconds=opts["timeslice"])
        results = []
        for policy in policies:
            bar = None
            if not opts["no_progress"]:
                from tqdm import tqdm

                bar = tqdm(total=len(jobs), desc=f"simulate {policy}", unit="job", file=sys.stderr)
            try:
                results.append(simulate(
                    nodes=nodes, quotas=quotas, jobs=jobs, policy=policy, cycle_interval=opts["cycle_interval"],
                    grace_seconds=opts["grace"], known_durations=not opts["unknown_durations"],
                    progress=bar.update if bar else None, options=options,
                    checkpoint_seconds=opts["checkpoint_every"], time_limit=opts["time_limit"],
                    service_half_life=opts["service_half_life"],
                ))
            finally:
                if bar:
                    bar.close()
        if opts["datasets"]:
            self._datasets(nodes, quotas, jobs, opts)
        if opts["json"]:
            dicts = [r.as_dict() for r in results]
            if types:
                for d, r in zip(dicts, results, strict=True):
                    d["per_type"] = per_type(r, nodes, jobs, *types)
            self.stdout.write(json.dumps(dicts, indent=2))
        else:
            self.stdout.write(f"{len(jobs)} jobs, {len(nodes)} nodes, {gpus:g} GPUs, {len(quotas)} quotas\n")
            header = f"{'':66}" + "".join(f"{r.policy:>14}" for r in results)
            self.stdout.write(header)
            for key, label, fmt in METRICS:
                self.stdout.write(f"{label:66}" + "".join(f"{fmt.format(getattr(r, key)):>14}" for r in results))
            self._per_project(jobs, results)
            self._per_priority(jobs, results)
            self._bigger_than_nominal(jobs, quotas)
            if types:
                self._per_type(results, nodes, jobs, *types)
            for r in results:
                self._wait_reasons(r)
        if opts["chart"]:
            try:
                chart(results, opts["chart"], title=f"{len(jobs)} jobs on {gpus:g} GPUs")
            except ImportError:
                raise CommandError("--chart needs matplotlib (pip install -r requirements-dev.txt)") from None
            self.stderr.write(f"chart written to {opts['chart']}")

    def _datasets(self, nodes, quotas, jobs, opts) -> None:
        """The node caches' hit rate for jobs that read datasets: placement ignoring caches, data-aware
        placement (a tie-break), and delay scheduling with each --locality-wait bound; for the latter,
        how long jobs were held back for their data and what that added to their queueing delay."""
        self.stdout.write(f"\ndatasets: {opts['datasets']} of {opts['dataset_gb']:g} GB, Zipf popularity, "
                          f"{opts['cache_gb']:g} GB LRU cache per node (an assumption: the trace names no datasets)")
        duration = {j.id: max(j.duration, 1.0) for j in jobs}
        runs = [(False, 0.0, "placement ignoring caches"), (True, 0.0, "data-aware placement")]
        runs += [(True, wait, f"delay scheduling, {wait:g} s") for wait in opts["locality_wait"] if wait > 0]
        base = None
        for locality, wait, label in runs:
            model = DatasetCacheModel([j.id for j in jobs], datasets=opts["datasets"], dataset_gb=opts["dataset_gb"],
                                      cache_gb=opts["cache_gb"], seed=opts["seed"], locality=locality,
                                      wait_seconds=wait)
            result = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn", cycle_interval=opts["cycle_interval"],
                              grace_seconds=opts["grace"], known_durations=not opts["unknown_durations"],
                              options=dataclasses.replace(SERVICE_OPTIONS, gpu_node_reserve=opts["gpu_node_reserve"]),
                              time_limit=opts["time_limit"], data=model)
            self.stdout.write(f"  {label:28} hit rate {model.hit_rate:6.1%}  ({model.hits} hits, {model.misses} fills, "
                              f"{model.filled_gb:,.0f} GB filled)")
            if locality and not wait:
                base = result
            if wait and base is not None:
                held = sorted(model.held.values())
                ratio = sorted(model.held[i] / duration[i] for i in model.held)
                both = [i for i in result.delays if i in base.delays]
                added = sorted((result.delays[i] - base.delays[i]) / duration[i] for i in both)
                self.stdout.write(
                    f"  {'':28} held back for data: {len(held)} of {len(jobs)} jobs, median {_median(held):,.0f} s, "
                    f"max {max(held, default=0):,.0f} s; held / run time: median {_median(ratio):.1%} (held jobs), "
                    f"{_median(ratio + [0.0] * (len(both) - len(ratio))):.1%} (all)")
                self.stdout.write(
                    f"  {'':28} queueing delay against data-aware placement: average {result.avg_queue_delay:,.0f} s "
                    f"(was {base.avg_queue_delay:,.0f} s); per job, added / run time: median {_median(added):.1%}, "
                    f"p90 {added[int(0.9 * (len(added) - 1))] if added else 0:.1%}")

    def _per_project(self, jobs: list[SimJob], results) -> None:
        """Who waits: per project, its jobs, the GPU-hours they asked for, and per policy their
        average queueing delay and the GPU-time held against the max-min fair split (1.0: its
        fair share) -- what a quota change moves."""
        asked: dict[str, list] = {}
        for j in jobs:
            entry = asked.setdefault(j.project, [0, 0.0])
            entry[0] += 1
            entry[1] += j.per_replica.gpu_milli * j.replicas / 1000 * j.duration / 3600
        # Waits count started jobs only: when some never started, say how many, per policy.
        unstarted = [Counter(j.project for j in jobs if j.id not in r.delays) for r in results]
        show_unstarted = any(unstarted)
        columns = [f"wait {r.policy} (s)" for r in results] + [f"share {r.policy}" for r in results]
        if show_unstarted:
            columns += [f"unstarted {r.policy}" for r in results]
        self.stdout.write("\nper project" + " " * 25 + f"{'jobs':>8}{'GPU-h':>10}" + "".join(f"{c:>18}" for c in columns))
        for project, (count, gpu_hours) in sorted(asked.items()):
            waits = [r.project_delay.get(project) for r in results]
            shares = [r.project_share.get(project) for r in results]
            cells = [f"{w:,.0f}" if w is not None else "-" for w in waits]
            cells += [f"{s:.2f}" if s is not None else "-" for s in shares]
            if show_unstarted:
                cells += [str(counts[project]) for counts in unstarted]
            self.stdout.write(f"{project[:36]:36}{count:>8}{gpu_hours:>10,.1f}" + "".join(f"{c:>18}" for c in cells))

    @staticmethod
    def _mixed(nodes, jobs, text: str):
        parts = text.split(":")
        try:
            share = float(parts[0])
            kind, model, arch = (parts[1:] + ["ascend", "910B", "arm64"][len(parts) - 1:])[:3]
            if kind not in ("amd", "ascend", "nvidia") or arch not in ("amd64", "arm64") or len(parts) > 4:
                raise ValueError
            return mixed_cluster(nodes, jobs, share=share, accelerator=kind, model=model, arch=arch)
        except ValueError:
            raise CommandError(f"--mixed {text!r}: expected SHARE[:TYPE[:MODEL[:ARCH]]] with a share between 0 and 1, "
                               "TYPE nvidia, amd or ascend and ARCH amd64 or arm64, e.g. 0.25:ascend:910B:arm64") from None

    def _per_type(self, results, nodes, jobs, node_types, job_types) -> None:
        """Utilisation and waits per accelerator type (a mixed cluster, --mixed)."""
        columns = [f"{figure} {r.policy}" for r in results for figure in ("util", "wait (s)", "p99 (s)", "started")]
        self.stdout.write("\nper accelerator type" + " " * 16 + f"{'devices':>8}{'jobs':>10}"
                          + "".join(f"{c:>16}" for c in columns))
        figures = [per_type(r, nodes, jobs, node_types, job_types) for r in results]
        for kind in figures[0]:
            cells = []
            for f in figures:
                row = f[kind]
                cells += [f"{row['utilisation']:.1%}", f"{row['avg_queue_delay']:,.0f}", f"{row['p99_queue_delay']:,.0f}",
                          f"{row['started']:.0f}"]
            self.stdout.write(f"{kind:36}{figures[0][kind]['devices']:>8g}{figures[0][kind]['jobs']:>10}"
                              + "".join(f"{c:>16}" for c in cells))

    def _per_priority(self, jobs: list[SimJob], results) -> None:
        """Waits per priority class (of the jobs that started): a change that shortens the average
        can still make one class, the latency-sensitive or the best-effort one, wait longer."""
        counts = Counter(j.priority for j in jobs)
        columns = [f"{figure} {r.policy} (s)" for r in results for figure in ("wait", "p99")]
        self.stdout.write("\nper priority class" + " " * 18 + f"{'jobs':>8}{'':10}" + "".join(f"{c:>18}" for c in columns))
        for priority, count in sorted(counts.items()):
            cells = []
            for r in results:
                figures = r.priority_delay.get(priority)
                cells += [f"{figures[k]:,.0f}" if figures else "-" for k in ("avg", "p99")]
            self.stdout.write(f"{f'P{priority}':36}{count:>8}{'':10}" + "".join(f"{c:>18}" for c in cells))

    def _bigger_than_nominal(self, jobs: list[SimJob], quotas: list[QuotaState]) -> None:
        """Projects with jobs bigger than their nominal GPUs: such jobs may not reclaim the nominal
        (docs/scheduling.md, Limits), so they start only when other projects leave quota idle."""
        nominal = {(q.project, q.pool): q.nominal.gpu_milli for q in quotas}
        big: dict[tuple[str, str], list[int]] = {}
        for j in jobs:
            need = j.per_replica.gpu_milli * j.replicas
            if need > nominal.get((j.project, j.pool), need):
                big.setdefault((j.project, j.pool), []).append(need)
        if not big:
            return
        self.stdout.write("\njobs bigger than their project's nominal GPUs (they may not reclaim it: they start only "
                          "when other projects leave quota idle; a nominal at least this big lets them)")
        for (project, pool), needs in sorted(big.items()):
            self.stdout.write(f"{project[:36]:36}{len(needs):>8} jobs of {min(needs) / 1000:g}-{max(needs) / 1000:g} GPUs, "
                              f"nominal {nominal[(project, pool)] / 1000:g} on pool {pool}")

    def _wait_reasons(self, result) -> None:
        """Why each project's jobs waited under one policy: GPU-hours spent pending, by the kind of
        pending reason the policy gave (the reason a queued workload shows in the API)."""
        totals: Counter = Counter()
        for kinds in result.project_waits.values():
            totals.update(kinds)
        kinds = [k for k, hours in totals.most_common() if hours >= 0.05]
        if not kinds:
            return
        labels = [WAIT_LABELS.get(k, k) for k in kinds]
        widths = [max(12, len(label) + 2) for label in labels]
        self.stdout.write(f"\nGPU-hours waiting, by pending reason ({result.policy})\n"
                          + f"{'project':36}" + "".join(f"{k:>{w}}" for k, w in zip(labels, widths, strict=True)))
        for project, waited in sorted(result.project_waits.items()):
            self.stdout.write(f"{project[:36]:36}" + "".join(
                f"{waited.get(k, 0.0):>{w},.1f}" for k, w in zip(kinds, widths, strict=True)))

    def _from_trace(self, opts):
        trace = Path(opts["trace_dir"])
        tasks = Path(opts["tasks"]) if opts["tasks"] not in TASK_LISTS else trace / TASK_LISTS[opts["tasks"]]
        nodes_file = trace / opts["nodes_file"]
        for path in (tasks, nodes_file):
            if not path.exists():
                raise CommandError(f"{path} does not exist (set --trace-dir).")
        nodes = load_alibaba_nodes(nodes_file, limit=opts["nodes"])
        try:
            jobs = load_alibaba_tasks(tasks, projects=opts["projects"], limit=opts["limit"],
                                      time_scale=opts["time_scale"], seed=opts["seed"])
        except KeyError as exc:
            raise CommandError(f"{tasks} has no column {exc}: it is not a timed pod list.") from None
        borrow = None if opts["borrowing_limit"] is None else int(opts["borrowing_limit"] * 1000)
        quotas = equal_quotas(nodes, {j.project for j in jobs}, borrowing_limit_gpu_milli=borrow)
        return nodes, quotas, jobs

    def _from_db(self, pool_name: str, days: float):

        pool = ResourcePool.objects.filter(name=pool_name).first()
        if pool is None:
            raise CommandError(f"Unknown resource pool '{pool_name}'.")
        snapshot = scheduling_snapshot()
        nodes = [n for n in snapshot.nodes if n.pool == pool_name]
        quotas = [q for q in snapshot.quotas if q.pool == pool_name]
        for q in quotas:  # a what-if starts from a fresh budget period
            q.gpu_hours_used = 0.0
        since = timezone.now() - timedelta(days=days)
        rows = (Workload.objects.filter(pool=pool, created_at__gte=since, started_at__isnull=False)
                .select_related("project").order_by("created_at"))
        jobs = []
        start = None
        for w in rows:
            start = start or w.created_at
            end = w.finished_at or timezone.now()
            jobs.append(SimJob(
                id=w.pk, project=w.project.slug, arrival=(w.created_at - start).total_seconds(),
                duration=max((end - w.started_at).total_seconds(), 1.0),
                per_replica=Resources(w.gpu_milli, w.cpu_milli, w.memory_mb), replicas=w.replicas,
                priority=w.priority, gpu_model=w.gpu_model, preemptible=w.preemptible, pool=pool_name,
            ))
        return nodes, quotas, jobs

    @staticmethod
    def _override(quotas: list[QuotaState], texts: list[str], pool: str) -> list[QuotaState]:
        by_project = {q.project: q for q in quotas}
        for text in texts:
            project, nominal, borrow, lend = _parse_quota(text)
            old = by_project.get(project)
            base = old.nominal if old else Resources(0, 10**9, 10**12)
            by_project[project] = QuotaState(
                project=project, pool=pool, nominal=Resources(int(nominal * 1000), base.cpu_milli, base.memory_mb),
                borrowing_limit_gpu_milli=None if borrow is None else int(borrow * 1000),
                lending_limit_gpu_milli=None if lend is None else int(lend * 1000),
                gpu_hour_budget=old.gpu_hour_budget if old else None,
            )
        return list(by_project.values())
