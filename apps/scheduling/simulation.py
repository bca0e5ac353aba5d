"""Trace-driven simulation of the scheduler: the same policy core, simulated time.

Pure Python (no ORM, no I/O besides the trace loaders reading CSV files) so that
`manage.py simulate`, bench/scheduler_*.py and tests share it.

Model: jobs arrive at their trace time; a scheduling cycle runs whenever something happens
(arrival, completion, a preempted job's exit), at most once per `cycle_interval` simulated
seconds; an admitted job holds its resources for its duration. A preempted job keeps its
resources for the grace period (it checkpoints), is then requeued and later resumes with the
work it had left (checkpoint at SIGTERM).
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import heapq
import math
import os
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from .policy import (
    DEFAULT_SERVICE_HALF_LIFE,
    SERVICE_OPTIONS,
    Accel,
    Admit,
    ClusterState,
    CycleState,
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
    fold,
    schedule,
)

EPOCH = datetime(2023, 1, 1)
# alibaba-gpu-2023: beside the checkout (../shared, where the project keeps it), or wherever
# CAIRN_TRACE_DIR says; the command, the tests and bench/ all read it from here.
ALIBABA_TRACE_DIR = Path(os.environ.get(
    "CAIRN_TRACE_DIR", Path(__file__).resolve().parents[3] / "shared" / "data" / "traces" / "alibaba-gpu-2023"))
# Alibaba QoS classes -> Cairn priority classes (P0 highest). Best-effort work is preemptible.
QOS_PRIORITY = {"Guaranteed": 1, "LS": 2, "Burstable": 3, "BE": 4}


@dataclass(frozen=True)
class SimJob:
    id: int
    project: str
    arrival: float  # seconds since the start of the trace
    duration: float
    per_replica: Resources
    replicas: int = 1
    priority: int = 3
    gpu_model: str = ""
    preemptible: bool = True
    pool: str = "sim"


@dataclass
class SimResult:
    policy: str
    jobs: int
    finished: int
    capacity_gpus: float
    utilisation: float  # allocated GPU-time / capacity-time, from the first arrival to the last
    utilisation_makespan: float  # same, until the last job finished (or the time limit)
    allocation_rate: float  # mean allocated share of the GPUs while work was waiting
    avg_queue_delay: float
    p99_queue_delay: float
    avg_jct: float
    preemptions: int
    # GPU-hours preempted jobs had run (this run, before their preemption) and, of those, the
    # GPU-hours they ran again because they were lost (0 when jobs checkpoint at SIGTERM)
    preempted_gpu_hours: float
    redone_gpu_hours: float
    most_preemptions: int  # the most times one job was preempted
    # preemptions by whose work preempted: its own project's (higher priority) or another's
    # (reclaiming its nominal, or higher priority on borrowed quota)
    preemptions_within_project: int
    fairness: float  # Jain's index over projects of GPU-time used / GPU-time spent in the system
    share_fairness: float  # Jain's index over projects of GPU-time allocated / max-min fair GPU-time
    cycles: int
    unfinished: int = 0
    series: list[tuple[float, float, int]] = field(default_factory=list)  # (time, allocated GPUs, queued)
    delays: dict[int, float] = field(default_factory=dict)  # job id -> time from arrival to first start
    project_service: dict[str, float] = field(default_factory=dict)  # project -> its ratio in the fairness index
    project_share: dict[str, float] = field(default_factory=dict)  # project -> its ratio in share_fairness
    project_delay: dict[str, float] = field(default_factory=dict)  # project -> its jobs' average queueing delay
    # priority class -> {"jobs", "avg", "p99", "max"} queueing delay of its started jobs: what a
    # change (a quota, the bounded wait) does to each class, not only to the average
    priority_delay: dict[int, dict[str, float]] = field(default_factory=dict)
    # project -> what its pending work waited on (Wait.kind) -> GPU-hours its jobs waited so
    project_waits: dict[str, dict[str, float]] = field(default_factory=dict)
    makespan: float = 0.0  # seconds from the first arrival to the last finish (or where it stopped)
    finish_times: dict[int, float] = field(default_factory=dict)  # job id -> when it finished

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items()
               if k not in ("series", "delays", "project_service", "project_share", "project_delay", "project_waits",
                            "priority_delay", "finish_times")}
        out["projects"] = {
            p: {"avg_queue_delay": self.project_delay.get(p), "share": self.project_share.get(p),
                "slowdown": self.project_service.get(p), "waiting_gpu_hours": self.project_waits.get(p, {})}
            for p in sorted(set(self.project_delay) | set(self.project_share) | set(self.project_service))
        }
        out["priorities"] = {f"P{p}": figures for p, figures in sorted(self.priority_delay.items())}
        return out


# -- loaders -------------------------------------------------------------------------------------

def load_alibaba_nodes(path: str | Path, *, pool: str = "sim", limit: int | None = None) -> list[NodeState]:
    """openb_node_list_*.csv: sn, cpu_milli, memory_mib, gpu, model. `limit` takes an evenly spread
    sample of that many nodes (keeping the mix of GPU models)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if limit is not None and limit < len(rows):
        step = len(rows) / limit
        rows = [rows[int(i * step)] for i in range(limit)]
    return [
        NodeState(name=row["sn"], pool=pool, gpu_model=row.get("model") or "",
                  allocatable=Resources(int(row["gpu"]) * 1000, int(row["cpu_milli"]), int(row["memory_mib"])))
        for row in rows
    ]


def _project_of(name: str, projects: int, seed: int = 0) -> str:
    # Seed 0 hashes the bare name, so assignments recorded before seeds existed stay the same.
    key = name if not seed else f"{seed}:{name}"
    return f"project-{int(hashlib.sha1(key.encode()).hexdigest(), 16) % projects:02d}"


def alibaba_task_resources(row: dict) -> Resources:
    """One pod of the trace as one replica: num_gpu > 1 means whole GPUs; 1 GPU may be a fraction."""
    num_gpu = int(row["num_gpu"])
    gpu_milli = int(row.get("gpu_milli") or 0)
    gpu = num_gpu * 1000 if num_gpu > 1 else (gpu_milli if num_gpu == 1 else 0)
    return Resources(gpu, int(row["cpu_milli"]), int(row["memory_mib"]))


def load_alibaba_tasks(path: str | Path, *, projects: int = 8, pool: str = "sim", include_cpu_only: bool = False,
                       limit: int | None = None, time_scale: float = 1.0, seed: int = 0) -> list[SimJob]:
    """openb_pod_list_*.csv. Arrival = creation_time / time_scale, duration = deletion_time -
    creation_time (pods never scheduled in the trace are skipped), qos -> priority, gpu_spec ->
    allowed models. The trace has no projects: each pod goes to one of `projects` by a hash of
    its name (salted by `seed`: each seed is another assignment of the same pods). time_scale > 1
    compresses arrivals (not durations) to raise the load."""
    jobs = []
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if not row.get("deletion_time") or not row.get("creation_time"):
                continue
            if row.get("scheduled_time", "0") == "":
                continue
            resources = alibaba_task_resources(row)
            if resources.gpu_milli == 0 and not include_cpu_only:
                continue
            created = float(row["creation_time"])
            duration = max(1.0, float(row["deletion_time"]) - created)
            arrival = created / time_scale
            qos = row.get("qos") or "LS"
            jobs.append(SimJob(
                id=i + 1, project=_project_of(row["name"], projects, seed), arrival=arrival, duration=duration,
                per_replica=resources, priority=QOS_PRIORITY.get(qos, 3), gpu_model=row.get("gpu_spec") or "",
                preemptible=qos != "Guaranteed", pool=pool,
            ))
            if limit is not None and len(jobs) >= limit:
                break
    return jobs


def equal_quotas(nodes: Iterable[NodeState], projects: Iterable[str], *, pool: str = "sim",
                 borrowing_limit_gpu_milli: int | None = None) -> list[QuotaState]:
    """Every project gets an equal share of the pool as nominal; borrowing as given (None: unlimited)."""
    nodes = list(nodes)
    projects = sorted(set(projects))
    total = Resources(sum(n.allocatable.gpu_milli for n in nodes), sum(n.allocatable.cpu_milli for n in nodes),
                      sum(n.allocatable.memory_mb for n in nodes))
    n = max(len(projects), 1)
    return [
        QuotaState(project=p, pool=pool, nominal=Resources(total.gpu_milli // n, total.cpu_milli // n,
                                                           total.memory_mb // n),
                   borrowing_limit_gpu_milli=borrowing_limit_gpu_milli)
        for p in projects
    ]


# -- baselines -----------------------------------------------------------------------------------

FIFO_WAIT = "fifo"  # the FIFO baseline's Wait.kind: behind (or at) the head of the queue


def fifo_schedule(snapshot: Snapshot, options: PolicyOptions | None = None, *,
                  cluster: ClusterState | None = None) -> list[Admit | Wait]:
    """Strict FIFO (the baseline): submit order only, no priorities, fair share, preemption or
    backfill; the first workload that does not fit blocks everyone behind it. Same quota
    arithmetic and the same placement as Cairn (the same options' placement settings), so only the
    queueing policy differs."""
    cycle = CycleState(snapshot, options or PolicyOptions(), cluster)
    decisions: list[Admit | Wait] = []
    blocked = False
    for position, w in enumerate(sorted(snapshot.pending, key=lambda w: (w.submitted_at, w.id)), start=1):
        if blocked:
            decisions.append(Wait(w.id, "fifo: behind the head of the queue", None, position, FIFO_WAIT))
            continue
        shape = w.per_replica.as_tuple()
        need = tuple(x * w.replicas for x in shape)
        cohort = cycle.cohorts[w.pool]
        models = frozenset(m for m in w.gpu_model.split("|") if m) or None
        done = None
        if cohort.check(w.project, need) is None:
            done = cycle.pools[w.pool].place_gang(shape, w.replicas, models)
        if done is None:
            blocked = True
            decisions.append(Wait(w.id, "fifo: head of the queue does not fit", None, position, FIFO_WAIT))
            continue
        cohort.add(w.project, need)
        decisions.append(Admit(w.id, [{"replica": i, "node": n.name, "gpus": g} for i, (n, g) in enumerate(done)]))
    return decisions


POLICIES: dict[str, Callable[..., list]] = {"cairn": schedule, "fifo": fifo_schedule}

NOT_YET_DECIDED = "not_yet_decided"  # arrived or requeued since the last cycle


# -- the simulator -------------------------------------------------------------------------------

def max_min_shares(capacity: float, demands: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Weighted max-min fair split of `capacity` (water-filling): no project gets more than it
    asks for, and what one does not need goes to the others in proportion to their weights."""
    shares = {p: 0.0 for p in demands}
    active = {p for p, d in demands.items() if d > 0}
    left = capacity
    while active and left > 1e-9:
        total = sum(weights.get(p, 1.0) for p in active)
        unit = left / total
        done = {p for p in active if demands[p] - shares[p] <= unit * weights.get(p, 1.0) + 1e-12}
        if not done:
            for p in active:
                shares[p] += unit * weights.get(p, 1.0)
            break
        for p in done:
            left -= demands[p] - shares[p]
            shares[p] = demands[p]
        active -= done
    return shares


def jain(values: Iterable[float]) -> float:
    values = list(values)
    squares = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * squares) if values and squares else 1.0


def simulate(*, nodes: list[NodeState], quotas: list[QuotaState], jobs: list[SimJob], policy: str = "cairn",
             cycle_interval: float = 0.0, grace_seconds: float = 30.0, known_durations: bool = True,
             progress: Callable[[int], None] | None = None, series_points: int = 2000,
             time_limit: float | None = None, options: PolicyOptions = SERVICE_OPTIONS,
             checkpoint_seconds: float | None = None, data=None,
             service_half_life: float = DEFAULT_SERVICE_HALF_LIFE) -> SimResult:
    """Replay `jobs` through the policy with simulated time; returns the metrics.

    `options`: how the policy decides (`SERVICE_OPTIONS`: as the service with no setting changed);
    a variant is `dataclasses.replace(SERVICE_OPTIONS, field=value)`. Its `grace_seconds` is taken
    from `grace_seconds` (how long a preempted job takes to exit here) and its `locality_wait` from
    `data`, which model the simulated cluster.

    `checkpoint_seconds`: None, a preempted job saves its state at SIGTERM (within the grace
    period) and keeps all its work; otherwise it keeps only the work up to its last periodic
    checkpoint, every that many seconds of a run (math.inf: none, it starts over). `data`: a
    datasim.DatasetCacheModel (jobs read datasets through node caches; its counters hold the hit rate)."""
    if checkpoint_seconds is not None and not checkpoint_seconds > 0:
        raise ValueError(f"checkpoint_seconds must be positive, not {checkpoint_seconds!r}")
    decide = POLICIES[policy]
    options = replace(options, grace_seconds=grace_seconds,
                      locality_wait=data.locality_wait(jobs[0].pool if jobs else "") if data is not None else None)
    cluster = ClusterState()  # free capacity kept between cycles, brought up to date from each snapshot
    jobs = sorted(jobs, key=lambda j: (j.arrival, j.id))
    by_id = {j.id: j for j in jobs}
    capacity = sum(n.allocatable.gpu_milli for n in nodes if n.schedulable) / 1000
    remaining = {j.id: j.duration for j in jobs}
    first_start: dict[int, float] = {}
    finish: dict[int, float] = {}
    pending: dict[int, PendingWorkload] = {}
    running: dict[int, tuple[RunningWorkload, float]] = {}  # id -> (state, start of this run)
    events: list[tuple[float, int, int, int]] = []  # (time, kind, seq, job id); kind 0 end, 1 exit
    seq = 0
    next_arrival = 0
    t = jobs[0].arrival if jobs else 0.0
    start_time = t
    last_arrival = jobs[-1].arrival if jobs else 0.0
    allocated = 0.0  # GPUs held now
    gpu_time = 0.0
    gpu_time_window = 0.0
    contention_time = 0.0
    contention_alloc = 0.0
    preemptions = 0
    within_project = 0
    preempted_gpu_seconds = 0.0
    redone_gpu_seconds = 0.0
    preempted_count: dict[int, int] = {}
    cycles = 0
    last_cycle = -math.inf
    cycle_due: float | None = None
    series: list[tuple[float, float, int]] = []
    sample_every = max((last_arrival - start_time) / max(series_points, 1), 1.0)
    next_sample = start_time
    done_count = 0
    # Per project: GPUs held now, GPUs asked for by its pending work, and over time the GPU-time
    # it held and the GPU-time a max-min fair split of the pool (weighted by nominal) gave it.
    held: dict[str, float] = {}
    waiting: dict[str, float] = {}
    held_time: dict[str, float] = {}
    fair_time: dict[str, float] = {}
    service_decayed: dict[str, tuple[float, float]] = {}
    pool = jobs[0].pool if jobs else ""
    weights = {q.project: max(q.nominal.gpu_milli, 1) for q in quotas}
    # Why work waits: GPUs now pending per (project, kind of its last pending reason), and the
    # GPU-time spent so. Kept per kind, not per job, so a span costs O(projects x kinds).
    wait_kind_of: dict[int, str] = {}
    pending_by_kind: dict[tuple[str, str], float] = {}
    waited_by_kind: dict[tuple[str, str], float] = {}

    def set_wait_kind(job_id: int, project: str, g: float, kind: str | None) -> None:
        old = wait_kind_of.pop(job_id, None)
        if old is not None:
            pending_by_kind[(project, old)] -= g
        if kind is not None:
            wait_kind_of[job_id] = kind
            pending_by_kind[(project, kind)] = pending_by_kind.get((project, kind), 0.0) + g

    def gpus(w_per: Resources, replicas: int) -> float:
        return w_per.gpu_milli * replicas / 1000

    while True:
        candidates = []
        if next_arrival < len(jobs):
            candidates.append(jobs[next_arrival].arrival)
        if events:
            candidates.append(events[0][0])
        if cycle_due is not None:
            candidates.append(cycle_due)
        if not candidates:
            break
        now = min(candidates)
        stop = time_limit is not None and now - start_time > time_limit
        if stop:  # account for the time up to the limit, then end there
            now = start_time + time_limit
        # Account for the time that passed.
        span = now - t
        if span > 0:
            gpu_time += allocated * span
            window_end = min(now, last_arrival)
            if window_end > t:
                gpu_time_window += allocated * (window_end - t)
            if pending:
                contention_time += span
                contention_alloc += allocated * span
            demands = {p: held.get(p, 0.0) + waiting.get(p, 0.0) for p in set(held) | set(waiting)}
            for p, share in max_min_shares(capacity, demands, weights).items():
                fair_time[p] = fair_time.get(p, 0.0) + share * span
                held_time[p] = held_time.get(p, 0.0) + held.get(p, 0.0) * span
            # Each project's service (GPU-time held, GPU-time in the system), decayed as the service's.
            keep = 0.5 ** (span / service_half_life)
            gain = service_half_life / math.log(2) * (1 - keep)
            for p in service_decayed.keys() | demands.keys():
                used, spent = service_decayed.get(p, (0.0, 0.0))
                service_decayed[p] = (used * keep + held.get(p, 0.0) * gain, spent * keep + demands.get(p, 0.0) * gain)
            for key, g in pending_by_kind.items():
                if g > 1e-9:
                    waited_by_kind[key] = waited_by_kind.get(key, 0.0) + g * span
            while next_sample <= now and len(series) < series_points * 2:
                series.append((next_sample - start_time, allocated, len(pending)))
                next_sample += sample_every
        t = now
        if stop:
            break
        changed = False
        while next_arrival < len(jobs) and jobs[next_arrival].arrival <= t:
            j = jobs[next_arrival]
            next_arrival += 1
            pending[j.id] = _pending(j, known_durations, remaining[j.id])
            waiting[j.project] = waiting.get(j.project, 0.0) + gpus(j.per_replica, j.replicas)
            set_wait_kind(j.id, j.project, gpus(j.per_replica, j.replicas), NOT_YET_DECIDED)
            changed = True
        while events and events[0][0] <= t:
            _, kind, _, job_id = heapq.heappop(events)
            state, started = running.pop(job_id)
            allocated -= gpus(state.per_replica, len(state.placement))
            held[state.project] -= gpus(state.per_replica, len(state.placement))
            changed = True
            if kind == 0:
                finish[job_id] = t
                done_count += 1
                if progress:
                    progress(1)
            else:  # a preempted job has exited: requeue it with the work it has left
                pending[job_id] = _pending(by_id[job_id], known_durations, remaining[job_id],
                                           preempted_by=state.preempted_for)
                waiting[state.project] += gpus(state.per_replica, len(state.placement))
                set_wait_kind(job_id, state.project, gpus(state.per_replica, len(state.placement)), NOT_YET_DECIDED)
        if cycle_due is not None and cycle_due <= t:
            cycle_due = None
            changed = True
        if not changed or not pending:
            continue
        if cycle_interval and t - last_cycle < cycle_interval:
            cycle_due = last_cycle + cycle_interval
            continue
        last_cycle = t
        cycles += 1
        now_dt = EPOCH + timedelta(seconds=t)
        if data is not None and data.locality:  # which nodes cache each pending job's dataset now
            pending = {i: dataclasses.replace(w, datasets_on=data.holders(i), locality_since=data.locality_since(i, EPOCH))
                       for i, w in pending.items()}
        snapshot = Snapshot(nodes=nodes, quotas=quotas, pending=list(pending.values()),
                            running=[state for state, _ in running.values()], now=now_dt,
                            project_service={(pool, p): v for p, v in service_decayed.items()})
        for decision in decide(snapshot, options, cluster=cluster):
            if isinstance(decision, Wait):
                w = pending[decision.workload_id]
                kind = decision.kind or "unknown"
                if wait_kind_of.get(w.id) != kind:
                    set_wait_kind(w.id, w.project, gpus(w.per_replica, w.replicas), kind)
                if data is not None:
                    data.waiting(w.id, kind == WaitKind.LOCALITY, t)
            elif isinstance(decision, Admit):
                w = pending.pop(decision.workload_id)
                if data is not None:
                    data.started(w.id, decision.placement, t)
                set_wait_kind(w.id, w.project, gpus(w.per_replica, w.replicas), None)
                j = by_id[w.id]
                first_start.setdefault(w.id, t)
                end = t + remaining[w.id]
                state = RunningWorkload(
                    id=w.id, project=w.project, pool=w.pool, priority=w.priority, per_replica=w.per_replica,
                    placement=tuple(decision.placement), preemptible=j.preemptible, admitted_at=now_dt,
                    expected_end=EPOCH + timedelta(seconds=end) if known_durations else None,
                    preemptions=preempted_count.get(w.id, 0), gpu_model=w.gpu_model,
                )
                running[w.id] = (state, t)
                allocated += gpus(w.per_replica, w.replicas)
                held[w.project] = held.get(w.project, 0.0) + gpus(w.per_replica, w.replicas)
                waiting[w.project] -= gpus(w.per_replica, w.replicas)
                seq += 1
                heapq.heappush(events, (end, 0, seq, w.id))
            elif isinstance(decision, Preempt):
                victim, started = running[decision.workload_id]
                preemptions += 1
                within_project += by_id[decision.preemptor_id].project == victim.project
                preempted_count[victim.id] = preempted_count.get(victim.id, 0) + 1
                ran = t - started
                kept = ran if checkpoint_seconds is None else (
                    0.0 if math.isinf(checkpoint_seconds) else ran // checkpoint_seconds * checkpoint_seconds)
                victim_gpus = gpus(victim.per_replica, len(victim.placement))
                preempted_gpu_seconds += victim_gpus * ran
                redone_gpu_seconds += victim_gpus * (ran - kept)
                exit_at = t + min(grace_seconds, max(remaining[victim.id] - ran, 1.0))
                remaining[victim.id] = max(remaining[victim.id] - kept, 1.0)
                stopping = RunningWorkload(
                    id=victim.id, project=victim.project, pool=victim.pool, priority=victim.priority,
                    per_replica=victim.per_replica, placement=victim.placement, preemptible=victim.preemptible,
                    admitted_at=victim.admitted_at, expected_end=EPOCH + timedelta(seconds=exit_at), stopping=True,
                    preempted_for=decision.preemptor_id, gpu_model=victim.gpu_model,
                )
                running[victim.id] = (stopping, exit_at)
                # Replace its completion event by an exit event.
                events = [e for e in events if e[3] != victim.id]
                heapq.heapify(events)
                seq += 1
                heapq.heappush(events, (exit_at, 1, seq, victim.id))
        if data is not None and (release := data.next_release(t)) is not None:  # a hold for data ends then
            cycle_due = release if cycle_due is None else min(cycle_due, release)

    delays = sorted(first_start[i] - by_id[i].arrival for i in first_start)
    jcts = [finish[i] - by_id[i].arrival for i in finish]
    # A replay cut short by time_limit is measured up to where it stopped.
    makespan = (max(finish.values()) if finish and len(finish) == len(jobs) else t) - start_time
    window = max(min(last_arrival, t) - start_time, 1e-9)
    per_project: dict[str, list[float]] = {}
    for i, end in finish.items():
        j = by_id[i]
        g = gpus(j.per_replica, j.replicas) or 1e-3
        used, spent = per_project.setdefault(j.project, [0.0, 0.0])
        per_project[j.project] = [used + g * j.duration, spent + g * (end - j.arrival)]
    service = {p: used / spent for p, (used, spent) in sorted(per_project.items()) if spent > 0}
    share = {p: held_time.get(p, 0.0) / fair for p, fair in sorted(fair_time.items()) if fair > 0}
    delay_of = {i: first_start[i] - by_id[i].arrival for i in first_start}
    waits: dict[str, list[float]] = {}
    by_priority: dict[int, list[float]] = {}
    for i, delay in delay_of.items():
        waits.setdefault(by_id[i].project, []).append(delay)
        by_priority.setdefault(by_id[i].priority, []).append(delay)
    priority_delay = {}
    for priority, ds in sorted(by_priority.items()):
        ds.sort()
        priority_delay[priority] = {"jobs": len(ds), "avg": sum(ds) / len(ds), "p99": _p99(ds), "max": ds[-1]}
    project_waits: dict[str, dict[str, float]] = {}
    for (p, kind), gpu_seconds in sorted(waited_by_kind.items()):
        project_waits.setdefault(p, {})[kind] = gpu_seconds / 3600
    return SimResult(
        policy=policy, jobs=len(jobs), finished=len(finish), capacity_gpus=capacity,
        utilisation=gpu_time_window / (capacity * window) if capacity else 0.0,
        utilisation_makespan=gpu_time / (capacity * makespan) if capacity and makespan else 0.0,
        allocation_rate=contention_alloc / (capacity * contention_time) if capacity and contention_time else 0.0,
        avg_queue_delay=sum(delays) / len(delays) if delays else 0.0,
        p99_queue_delay=_p99(delays),
        avg_jct=sum(jcts) / len(jcts) if jcts else 0.0, preemptions=preemptions,
        preempted_gpu_hours=preempted_gpu_seconds / 3600, redone_gpu_hours=redone_gpu_seconds / 3600,
        most_preemptions=max(preempted_count.values(), default=0), preemptions_within_project=within_project,
        fairness=jain(service.values()),
        share_fairness=jain(share.values()), cycles=cycles,
        unfinished=len(jobs) - len(finish), series=series,
        delays=delay_of, project_service=service,
        project_share=share, project_delay={p: sum(d) / len(d) for p, d in sorted(waits.items())},
        project_waits=project_waits, priority_delay=priority_delay, makespan=makespan, finish_times=dict(finish),
    )


# -- mixed accelerators (docs/accelerators.md) -----------------------------------------------------

def mixed_cluster(nodes: list[NodeState], jobs: list[SimJob], *, share: float, accelerator: str = "ascend",
                  model: str = "910B", arch: str = "arm64", base_arch: str = "amd64",
                  ) -> tuple[list[NodeState], list[SimJob], dict[str, str], dict[int, str]]:
    """A share of the nodes relabelled as another vendor and architecture, and the same share of
    the GPU jobs asking for it (any model, that architecture); the rest stay NVIDIA on `base_arch`.

    The choice is deterministic: nodes evenly spread through the list, jobs by a seeded hash of
    their id. Returns the nodes and jobs with accelerator-qualified model keys (policy.fold, as
    the service does), and each node's and job's type, for `per_type`."""
    if not 0 < share < 1:
        raise ValueError(f"share must be between 0 and 1, not {share!r}")
    accels: dict[tuple[str, str], Accel] = {}
    node_types: dict[str, str] = {}
    for i, n in enumerate(nodes):
        other = math.floor((i + 1) * share) > math.floor(i * share)
        kind = (accelerator if other else "nvidia") if n.allocatable.gpu_milli else "none"
        a = Accel(kind, model if other else n.gpu_model, arch if other else base_arch)
        accels[(n.pool, n.name)] = a
        node_types[n.name] = kind
    asks: dict[int, Accel] = {}
    job_types: dict[int, str] = {}
    for j in jobs:
        other = j.per_replica.gpu_milli and zlib.crc32(f"accel:{j.id}".encode()) % 10_000 < share * 10_000
        kind = (accelerator if other else "nvidia") if j.per_replica.gpu_milli else "none"
        asks[j.id] = Accel(kind, "" if other else j.gpu_model, arch if other else "")
        job_types[j.id] = kind
    pending = [_pending(j, True, j.duration) for j in jobs]
    folded = fold(Snapshot(nodes=nodes, quotas=[], pending=pending), accels, asks)
    keys = {w.id: w.gpu_model for w in folded.pending}
    return folded.nodes, [replace(j, gpu_model=keys[j.id]) for j in jobs], node_types, job_types


def per_type(result: SimResult, nodes: list[NodeState], jobs: list[SimJob], node_types: dict[str, str],
             job_types: dict[int, str]) -> dict[str, dict[str, float]]:
    """Per accelerator type: devices, jobs, how many started, their average and p99 queueing delay,
    and utilisation (device-time of its finished jobs / its devices x the makespan)."""
    out: dict[str, dict[str, float]] = {}
    for kind in sorted(set(job_types.values()) | {t for t in node_types.values() if t != "none"}):
        devices = sum(n.allocatable.gpu_milli for n in nodes if node_types.get(n.name) == kind) / 1000
        mine = [j for j in jobs if job_types.get(j.id) == kind]
        delays = sorted(result.delays[j.id] for j in mine if j.id in result.delays)
        used = sum(j.per_replica.gpu_milli * j.replicas / 1000 * j.duration for j in mine
                   if j.id in result.finish_times)
        out[kind] = {
            "devices": devices, "jobs": len(mine), "started": len(delays),
            "avg_queue_delay": sum(delays) / len(delays) if delays else 0.0, "p99_queue_delay": _p99(delays),
            "utilisation": used / (devices * result.makespan) if devices and result.makespan else 0.0,
        }
    return out


def _p99(ordered: list[float]) -> float:
    """The 99th percentile of an ascending list (nearest rank below), 0 when empty."""
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


def _pending(j: SimJob, known_durations: bool, left: float, preempted_by: int | None = None) -> PendingWorkload:
    return PendingWorkload(
        id=j.id, project=j.project, pool=j.pool, priority=j.priority, submitted_at=EPOCH + timedelta(seconds=j.arrival),
        replicas=j.replicas, per_replica=j.per_replica, gpu_model=j.gpu_model,
        expected_seconds=left if known_durations else None, preempted_by=preempted_by,
    )


def chart(results: list[SimResult], path: str | Path, *, title: str = "") -> None:
    """A PNG with allocated GPUs and queue length over time for each policy (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for result in results:
        xs = [s[0] / 3600 for s in result.series]
        top.plot(xs, [s[1] for s in result.series], label=f"{result.policy} (util {result.utilisation:.1%})",
                 linewidth=0.8)
        bottom.plot(xs, [s[2] for s in result.series], label=result.policy, linewidth=0.8)
    if results:
        top.axhline(results[0].capacity_gpus, color="grey", linestyle=":", linewidth=0.8, label="capacity")
    top.set_ylabel("allocated GPUs")
    bottom.set_ylabel("queued workloads")
    bottom.set_xlabel("simulated hours")
    top.legend(loc="upper right", fontsize=8)
    bottom.legend(loc="upper right", fontsize=8)
    if title:
        top.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = [
    "SimJob", "SimResult", "alibaba_task_resources", "chart", "equal_quotas", "fifo_schedule", "load_alibaba_nodes",
    "load_alibaba_tasks", "max_min_shares", "simulate",
]
