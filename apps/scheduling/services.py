"""Applies the policy: snapshot from PostgreSQL, pure decisions, compare-and-set writes.

Only one scheduler runs a cycle at a time: PostgreSQL elects it with a transaction-level
advisory lock (SQLite, used in embedded mode, serialises writers by itself).
"""
import dataclasses
import logging
import math
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, FloatField, Func, Q, Sum, Value, When
from django.db.models.functions import Coalesce, Exp, Greatest, Least
from django.utils import timezone

from apps.clusters.affinity import describe_terms, node_matches
from apps.clusters.models import Node, PoolQueue, ResourcePool
from apps.core.outbox import outbox_enqueue
from apps.projects.models import Project
from apps.quotas.models import Quota, UsageRecord
from apps.quotas.selectors import quota_usage
from apps.storage.selectors import dataset_cache_view
from apps.workloads.choices import ACTIVE, TERMINAL, WorkloadStatus
from apps.workloads.deadlines import expected_end
from apps.workloads.kinds import KindSpec, registered_kinds, registered_spec
from apps.workloads.models import Workload
from apps.workloads.services import workload_preempt, workload_transition

from .policy import (
    DEFAULT_GPU_NODE_RESERVE,
    DEFAULT_REPREEMPT_MIN_RUNTIME,
    DEFAULT_SERVICE_HALF_LIFE,
    DEFAULT_STARVATION_SECONDS,
    DEFAULT_TIMESLICE_SECONDS,
    SERVICE_OPTIONS,
    Accel,
    Admit,
    ClusterState,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Preempt,
    QuotaState,
    Resources,
    RunningWorkload,
    ScaleUp,
    Snapshot,
    Wait,
    WaitKind,
    explain,
    explain_pins,
    fill_seconds,
    fold,
    pin,
    scale_up_ids,
    schedule,
)

logger = logging.getLogger(__name__)
SCHEDULER_LOCK_KEY = 0x43A1_0001  # arbitrary, constant: "the Cairn scheduler"


# The pools' free capacity kept between this process's cycles (policy/cluster.py): each cycle brings
# it up to date from the snapshot by what changed (ended, admitted or moved workloads; pools whose
# nodes changed) instead of rebuilding it; the decisions are the same either way. Another process
# taking the leadership starts with its own. A cycle that finds it in use (embedded mode runs cycles
# in threads) rebuilds its own.
_KEPT = ClusterState()
_KEPT_LOCK = threading.Lock()


def _schedule(snapshot: Snapshot, options: PolicyOptions) -> list:
    if not _KEPT_LOCK.acquire(blocking=False):
        return schedule(snapshot, options)
    try:
        return schedule(snapshot, options, cluster=_KEPT)
    finally:
        _KEPT_LOCK.release()


def policy_options() -> PolicyOptions:
    """How the policy decides here: SERVICE_OPTIONS with the settings (CAIRN_STOP_GRACE_SECONDS,
    _REPREEMPT_MIN_RUNTIME_SECONDS, _STARVATION_SECONDS, _TIMESLICE_SECONDS, _GPU_NODE_RESERVE) and
    each pool's delay-scheduling bound (ResourcePool.locality_wait_seconds). Read every cycle, so a
    pool's bound changed in the admin counts from the next one."""
    locality_wait = {name: float(seconds) for name, seconds in
                     ResourcePool.objects.filter(locality_wait_seconds__gt=0).values_list("name", "locality_wait_seconds")}
    cairn = settings.CAIRN
    return dataclasses.replace(
        SERVICE_OPTIONS,
        grace_seconds=float(cairn["STOP_GRACE_SECONDS"]),
        repreempt_min_runtime_seconds=float(cairn.get("REPREEMPT_MIN_RUNTIME_SECONDS", DEFAULT_REPREEMPT_MIN_RUNTIME)),
        starvation_seconds=float(cairn.get("STARVATION_SECONDS", DEFAULT_STARVATION_SECONDS)),
        timeslice_seconds=float(cairn.get("TIMESLICE_SECONDS", DEFAULT_TIMESLICE_SECONDS)),
        gpu_node_reserve=gpu_node_reserve(),
        locality_wait=locality_wait or None,
    )


@dataclass
class CycleResult:
    ran: bool
    admitted: int = 0
    waiting: int = 0
    preempted: int = 0
    # Waits written: those whose kind, reason class (reason_class), estimate or data hold changed, and
    # those whose figures were refreshed (waits_refreshed of them: same class, text past the bound).
    waits_written: int = 0
    waits_refreshed: int = 0
    queued_read: int = 0  # queued rows read in full this cycle (the rest came from the kept copy)
    # Seconds of the cycle's parts: read (the snapshot), decide (the policy), write (admissions,
    # preemptions, waits), for logs and bench/scheduler_service_cycle.py; "<part>_cpu": this
    # process's CPU time in it (PostgreSQL's is its own process's).
    timings: dict[str, float] = field(default_factory=dict)


def _try_leader_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [SCHEDULER_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _node_domains(node: Node) -> tuple[str, ...]:
    """Topology domains of a node, finest first: the pool's `topology_keys` (listed finest first,
    e.g. ["cairn.dev/nvlink-block", "topology.kubernetes.io/rack"]) read from its labels, then its
    `topology_domain`."""
    labels = node.labels or {}
    domains = [f"{key}={labels[key]}" for key in (node.pool.topology_keys or []) if labels.get(key)]
    if node.topology_domain:
        domains.append(node.topology_domain)
    return tuple(domains)


def _placement_tuple(placement) -> tuple[dict, ...]:
    return tuple(entry for entry in placement or [] if isinstance(entry, dict))


def scheduling_snapshot(*, now=None) -> Snapshot:
    """Plain-data view of nodes, quotas, active and queued workloads (a handful of queries), with
    accelerator types and architectures folded into the model keys (policy.fold)."""
    return scheduling_inputs(now=now)[0]


def scheduling_inputs(*, now=None) -> tuple[Snapshot, dict[tuple[str, str], Accel], dict[int, Accel]]:
    """The folded snapshot, each node's accelerator and each pending workload's ask (for policy.explain)."""
    with _INPUTS_LOCK:
        return _scheduling_inputs(now=now)


def _scheduling_inputs(*, now=None) -> tuple[Snapshot, dict[tuple[str, str], Accel], dict[int, Accel]]:
    now = now or timezone.now()
    grace = timedelta(seconds=float(settings.CAIRN["STOP_GRACE_SECONDS"]))
    node_rows = list(Node.objects.filter(pool__isnull=False).select_related("pool"))
    nodes = [
        NodeState(
            name=n.name, pool=n.pool.name, gpu_model=n.gpu_model, domains=_node_domains(n),
            schedulable=n.schedulable and n.health in ("healthy", "degraded"),
            # what the node's pods that are not Cairn's hold (DaemonSets, other tenants) is not Cairn's
            allocatable=Resources(*n.free_for_cairn()),
        )
        for n in node_rows
    ]
    accels = {(n.pool.name, n.name): Accel(type=n.accelerator_type if n.gpu_count else "none", model=n.gpu_model,
                                           arch=n.cpu_arch) for n in node_rows}
    quota_rows = list(Quota.objects.select_related("project", "pool"))
    usage = quota_usage(quotas=quota_rows, now=now, queued=False)
    quotas = [
        QuotaState(
            project=q.project.slug, pool=q.pool.name,
            nominal=Resources(q.nominal_gpu_milli, q.nominal_cpu_milli, q.nominal_memory_mb),
            borrowing_limit_gpu_milli=q.borrowing_limit_gpu_milli, lending_limit_gpu_milli=q.lending_limit_gpu_milli,
            gpu_hour_budget=None if q.gpu_hour_budget is None else float(q.gpu_hour_budget),
            gpu_hours_used=usage[q.pk]["gpu_hours_this_period"], budget_period=q.budget_period,
        )
        for q in quota_rows
    ]
    fields = ("id", "project__slug", "pool__name", "placement", "gpu_milli", "cpu_milli", "memory_mb", "replicas",
              "priority", "preemptible", "admitted_at", "started_at", "max_runtime_seconds", "status",
              "stop_requested_at", "preempted_by", "preemptions")
    running = []
    for w in Workload.objects.filter(status__in=ACTIVE).select_related("project", "pool").only(*fields):
        stopping = w.status == WorkloadStatus.STOPPING
        placement = _placement_tuple(w.placement)
        running.append(RunningWorkload(
            id=w.pk, project=w.project.slug, pool=w.pool.name, priority=w.priority,
            per_replica=Resources(w.gpu_milli, w.cpu_milli, w.memory_mb), placement=placement,
            preemptible=w.preemptible, admitted_at=w.admitted_at, stopping=stopping,
            # Stopping: gone within the grace period. Otherwise its run-time limit says when it
            # ends at the latest (what reservations' estimated starts are made of); none: unknown.
            expected_end=(w.stop_requested_at or now) + grace if stopping else expected_end(w),
            preempted_for=w.preempted_by_id if stopping else None, preemptions=w.preemptions,
        ))
    queued = _queued_rows()
    asks = {w.pk: w.ask for w in queued}
    caches = dataset_cache_view(workloads=[w for w in queued if w.spec])  # nodes holding its datasets (apps/storage)
    pending = [w.pending if w.pk not in caches else dataclasses.replace(w.pending, datasets_on=caches[w.pk][0])
               for w in queued]
    pins = _pinned(queued, node_rows)
    if pins:
        pending = [dataclasses.replace(p, nodes=pins[p.id][0], nodes_why=pins[p.id][1]) if p.id in pins else p
                   for p in pending]
    # A running deployment's scale-up asks for its extra replicas like any admission: a ScaleUp under
    # the id of the workload it runs as (its kind's KindSpec.scale_ups; scale_admit and scale_wait
    # apply the answer).
    scale_ups = []
    _SCALE_UP_KINDS.clear()
    for spec in _kinds_with(lambda spec: spec.scale_ups):
        for w, extra, row in spec.scale_ups():
            scale_ups.append((w, extra, row))
            _SCALE_UP_KINDS[w.pk] = spec
    pending += [
        ScaleUp(
            id=w.pk, project=w.project.slug, pool=w.pool.name, priority=w.priority,
            submitted_at=row.requested_at or now, replicas=extra,
            per_replica=Resources(w.gpu_milli, w.cpu_milli, w.memory_mb), gpu_model=w.gpu_model,
            name=f"{w.name} (scale-up)",
        )
        for w, extra, row in scale_ups
    ]
    asks.update({w.pk: Accel(type=(w.accelerator_type or "nvidia") if w.gpu_milli else "none", model=w.gpu_model,
                              arch=w.arch) for w, _, _ in scale_ups})
    snapshot = Snapshot(nodes=nodes, quotas=quotas, pending=pending, running=running, now=now,
                        project_service=project_service(now=now, half_life=service_half_life()))
    _INPUTS.fills = {wid: missing for wid, (_holders, missing) in caches.items() if missing}
    _INPUTS.shown = {w.pk: w.shown for w in queued}
    return pin(fold(snapshot, accels, asks)), accels, asks


def _pinned(queued: list["_Queued"], node_rows: list[Node]) -> dict[int, tuple[frozenset[str], str]]:
    """Per queued workload with a node affinity (Workload.node_affinity, set by its backend: a
    volume bound in one zone), the nodes of its pool that match it, and what pins it for people."""
    out = {}
    for w in queued:
        if w.terms:
            names = frozenset(n.name for n in node_rows
                              if n.pool.name == w.pending.pool and node_matches(n.name, n.labels, w.terms))
            out[w.pk] = (names, f"its volume's node affinity ({describe_terms(w.terms)})")
    return out


# -- the queued workloads, read only where they changed -----------------------------------------

class _Queued:
    """What the cycle needs of one queued workload, built once per version of its row."""

    __slots__ = ("pk", "version", "pending", "ask", "spec", "pool", "shown", "terms")

    def __init__(self, row: dict, version: str, projects: dict[int, str], pools: dict[int, tuple[str, int]]):
        self.pk = row["id"]
        self.version = version
        pool_name, cluster_id = pools[row["pool_id"]]
        self.pending = PendingWorkload(
            id=row["id"], project=projects[row["project_id"]], pool=pool_name, priority=row["priority"],
            submitted_at=row["created_at"], replicas=row["replicas"],
            per_replica=Resources(row["gpu_milli"], row["cpu_milli"], row["memory_mb"]), gpu_model=row["gpu_model"],
            name=row["name"], preempted_by=row["preempted_by_id"],
            # Its run-time limit bounds how long it holds its resources: GPU-hour budgets are
            # checked and charged for that long (a requeued workload gets its full limit again).
            expected_seconds=float(row["max_runtime_seconds"]) if row["max_runtime_seconds"] else None,
            locality_since=row["locality_since"],
        )
        self.ask = Accel(type=(row["accelerator_type"] or "nvidia") if row["gpu_milli"] else "none",
                         model=row["gpu_model"], arch=row["arch"])
        spec = row["spec"] or {}
        self.spec = {"datasets": spec["datasets"]} if spec.get("datasets") else None  # for dataset_cache_view
        self.pool = _PoolRef(cluster_id)
        self.terms = list(row.get("node_affinity") or [])  # the nodes it may run on (pinning.py)
        # What the scheduler last wrote on it, and when (_apply_waits decides from it what to write).
        self.shown = (row["pending_reason"], row["waiting_on"], row["estimated_start"], row["locality_since"],
                      row["pending_reason_at"])


@dataclass(frozen=True)
class _PoolRef:
    cluster_id: int


_QUEUED_FIELDS = ("id", "project_id", "pool_id", "priority", "created_at", "replicas", "gpu_milli", "cpu_milli",
                  "memory_mb", "gpu_model", "name", "preempted_by_id", "max_runtime_seconds", "accelerator_type",
                  "arch", "spec", "pending_reason", "waiting_on", "estimated_start", "locality_since",
                  "node_affinity", "pending_reason_at")


class _QueuedCache:
    """The queued workloads kept between this process's cycles, each with the version of its row:
    PostgreSQL's xmin, which every UPDATE of the row changes whoever writes it (a status change, a
    user's edit, the scheduler's own wait). A cycle reads every queued row's id and xmin, and reads in
    full only rows that are new or whose xmin moved; the waits the scheduler writes come back with
    their new xmin (RETURNING), so a cycle's own writes are not read again. Without PostgreSQL
    (embedded mode, SQLite) every queued row is read each cycle."""

    def __init__(self) -> None:
        self.rows: dict[int, _Queued] = {}
        self.names: tuple[dict, dict] = ({}, {})
        self.fills: dict[int, int] = {}
        self.shown: dict[int, tuple] = {}
        self.read = 0
        # Per pool name: the queue order last written (PoolQueue.workloads); None: not read yet.
        self.queues: dict[str, list[int]] | None = None
        self.stamps: dict[str, datetime] = {}  # their updated_at, as written or read
        self.last_cycle: datetime | None = None  # when this process's previous cycle ran (_apply_waits)


_INPUTS = _QueuedCache()
_INPUTS_LOCK = threading.RLock()  # one cycle (or snapshot) at a time reads and writes through it
_CHUNK = 5000


def _NEWEST_FIRST(w: _Queued) -> tuple:
    return (-w.pending.submitted_at.timestamp(), -w.pk)


def _queued_rows() -> list[_Queued]:
    projects = dict(Project.objects.values_list("id", "slug"))
    pools = {pk: (name, cluster) for pk, name, cluster in ResourcePool.objects.values_list("id", "name", "cluster_id")}
    kept = _INPUTS
    if (projects, pools) != kept.names:  # a rename or a new project: build every row afresh
        kept.rows, kept.names = {}, (projects, pools)
    queued = Workload.objects.filter(status=WorkloadStatus.QUEUED)
    if connection.vendor != "postgresql":
        kept.rows = {row["id"]: _Queued(row, "", projects, pools) for row in queued.values(*_QUEUED_FIELDS)}
        kept.read = len(kept.rows)
        return sorted(kept.rows.values(), key=_NEWEST_FIRST)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, xmin::text FROM {Workload._meta.db_table} WHERE status = %s",
                       [WorkloadStatus.QUEUED])
        versions = dict(cursor.fetchall())
    rows = {pk: row for pk, row in kept.rows.items() if versions.get(pk) == row.version}
    stale = [pk for pk in versions if pk not in rows]
    for i in range(0, len(stale), _CHUNK):
        chunk = stale[i:i + _CHUNK]
        fetched = queued.filter(pk__in=chunk).extra(select={"xmin_version": "xmin::text"}).values(
            "xmin_version", *_QUEUED_FIELDS)  # the row and its version read together
        for row in fetched:
            if row["project_id"] not in projects or row["pool_id"] not in pools:  # created since the names were read
                projects.update(Project.objects.filter(pk=row["project_id"]).values_list("id", "slug"))
                pools.update((pk, (name, cluster)) for pk, name, cluster in
                             ResourcePool.objects.filter(pk=row["pool_id"]).values_list("id", "name", "cluster_id"))
            rows[row["id"]] = _Queued(row, row["xmin_version"], projects, pools)
    kept.rows, kept.read = rows, len(stale)
    return sorted(rows.values(), key=_NEWEST_FIRST)  # the model's order, as the queue was always read


def service_half_life() -> float:
    """The configured half-life of each project's service (CAIRN_SERVICE_HALF_LIFE_SECONDS). A value
    that is not more than 0 is refused at startup (apps/scheduling/checks.py)."""
    return float(settings.CAIRN.get("SERVICE_HALF_LIFE_SECONDS", DEFAULT_SERVICE_HALF_LIFE))


# Past this many half-lives an interval weighs less than 0.1 % (2 ** -10): not read.
SERVICE_HORIZON_HALF_LIVES = 10
NOT_ENDED = sorted(set(WorkloadStatus.values) - TERMINAL)  # queued or holding resources: in the system


def project_service(*, now: datetime, half_life: float) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (pool name, project slug): (GPU-seconds its work held, GPU-seconds its work spent in
    the system, held or queued), each GPU-second at time t weighted 0.5 ** ((now - t) / half_life):
    the policy's Snapshot.project_service, summed as the simulator sums it.

    Why: slowdown fairness. Among work past the bounded wait, the policy serves first the project
    served worst relative to its time in the system (held over spent), so a project whose work
    queued long and ran little is not overtaken by newer or higher-share work again and again. The
    past fades with a half-life, as Slurm's fair-share usage does (PriorityDecayHalfLife): last
    month's luck, good or bad, does not decide today.

    Held: the usage ledger (UsageRecord, one row per allocation; an open one up to now). In the
    system: each GPU workload (all its replicas) from its submission (created_at, the snapshot's
    submitted_at) to its end: finished_at, which every terminal transition sets; a terminal row
    without one (not written by workload_transition) ends at updated_at, its last status change;
    a workload not ended counts up to now. Only intervals that end within the last
    SERVICE_HORIZON_HALF_LIVES half-lives are read, over an index, and the database sums them: two
    queries, a row per pair. The scheduler runs this every cycle; with 29,000 ledger rows and as
    many workloads in the window (about 400 a day), reading them row by row into Python took 0.85 s,
    the sums 0.15 s. Pairs with none are absent (the policy counts them as fully served).
    """
    since = now - timedelta(seconds=half_life * SERVICE_HORIZON_HALF_LIVES)
    at = now.timestamp()

    def decayed(gpus, start, end):
        # Σ gpus * ∫ 2 ** ((t - now) / half_life) dt over [start, end] (seconds; end capped at now),
        # less the constant factor half_life / ln 2 (applied below). The exponent stops at -700:
        # PostgreSQL's exp() raises an error where it would underflow.
        end = Least(end, Value(at))
        start = Least(start, end)

        def weight(t):
            return Exp(Greatest((t - Value(at)) * Value(math.log(2) / half_life), Value(-700.0)))

        return Sum(gpus * (weight(end) - weight(start)), output_field=FloatField())

    held = (UsageRecord.objects.filter(gpu_milli__gt=0).filter(Q(ended_at__isnull=True) | Q(ended_at__gte=since))
            .order_by().values("pool__name", "project__slug")
            .annotate(service=decayed(F("gpu_milli") / 1000.0, _Seconds("started_at"),
                                      Coalesce(_Seconds("ended_at"), Value(at))))
            .values_list("pool__name", "project__slug", "service"))
    ended = Case(When(status__in=TERMINAL, then=Coalesce(_Seconds("finished_at"), _Seconds("updated_at"))),
                 default=Value(at))
    in_system = (Workload.objects.filter(gpu_milli__gt=0)
                 .filter(Q(status__in=NOT_ENDED) | Q(finished_at__gte=since)
                         | Q(finished_at__isnull=True, updated_at__gte=since))
                 .order_by().values("pool__name", "project__slug")
                 .annotate(service=decayed(F("gpu_milli") * F("replicas") / 1000.0, _Seconds("created_at"), ended))
                 .values_list("pool__name", "project__slug", "service"))
    scale = half_life / math.log(2)
    used = {(pool, project): total * scale for pool, project, total in held}
    spent = {(pool, project): total * scale for pool, project, total in in_system}
    return {key: (used.get(key, 0.0), spent.get(key, 0.0)) for key in used.keys() | spent.keys()}


class _Seconds(Func):
    """A datetime column as seconds since 1970 (a float), on PostgreSQL and on SQLite (embedded)."""

    output_field = FloatField()
    template = "date_part('epoch', %(expressions)s)"  # a float (EXTRACT gives a slower numeric)

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)",
                           **extra_context)


def gpu_node_reserve() -> float:
    """The configured GPU-node reserve (CAIRN_GPU_NODE_RESERVE). A value out of 0..1 is refused at
    startup (apps/scheduling/checks.py); clamped here too, for settings changed while running."""
    value = float(settings.CAIRN.get("GPU_NODE_RESERVE", DEFAULT_GPU_NODE_RESERVE))
    return min(1.0, max(0.0, value)) if math.isfinite(value) else DEFAULT_GPU_NODE_RESERVE


# A number in a reason, not inside a quoted name ('pool-2') nor part of a word (a100): a figure.
_FIGURE = re.compile(r"'[^']*'|(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")


def reason_class(kind: str, reason: str) -> str:
    """What a wait says with its figures left out: the kind and the reason's words and names (the
    blocking resource, the pool, the project, the GPU models), each number replaced by '#'. Two
    reasons of the same class differ only in figures of the moment (the most free on one node, a
    project's usage or what it may borrow), which _apply_waits refreshes on a bound, not every cycle."""
    return kind + "|" + _FIGURE.sub(lambda m: m.group(0) if m.group(0)[0] == "'" else "#", reason)


def wait_refresh_seconds() -> float:
    """How old a wait's figures may get before they are rewritten (CAIRN_WAIT_REFRESH_SECONDS; 0 or
    less: rewritten whenever they change)."""
    return float(settings.CAIRN.get("WAIT_REFRESH_SECONDS", 30.0))


def _apply_waits(waits: list[Wait], now: datetime) -> tuple[int, int]:
    """Write the waits that must be, in bulk, only on rows still queued; returns (written, of which
    refreshed). At once: a wait whose kind, reason class (reason_class), estimated start or data
    hold (locality_since, set at the first LOCALITY wait) changed. On a bound: a wait whose reason
    differs from the stored one only in its figures is rewritten once the stored text is older than
    wait_refresh_seconds(), oldest first, and at most twice the share of the queue that ages past
    the bound between two cycles, so that no cycle rewrites every wait whose figures moved (a steady
    queue's quota and capacity figures move every cycle). Positions are kept per pool (_apply_queues)."""
    shown = _INPUTS.shown
    bound = wait_refresh_seconds()
    last, _INPUTS.last_cycle = _INPUTS.last_cycle, now
    classes: dict[tuple[str, str], str] = {}  # many waits share a reason (memoised waits): each class once

    def class_of(kind: str, reason: str) -> str:
        key = (kind, reason)
        known = classes.get(key)
        if known is None:
            known = classes[key] = reason_class(kind, reason)
        return known

    changed, stale = [], []
    for d in waits:
        before = shown.get(d.workload_id)
        since = before[3] if before is not None else None
        if d.kind == WaitKind.LOCALITY and since is None:
            since = now
        after = (d.reason, d.kind, d.estimated_start, since)
        if before is not None and after == before[:4]:
            continue
        if (bound <= 0 or before is None or before[1:4] != after[1:]
                or class_of(before[1], before[0]) != class_of(d.kind, d.reason)):
            changed.append((d.workload_id, *after))
        elif before[4] is None or (now - before[4]).total_seconds() >= bound:
            stale.append((before[4], d.workload_id, after))
    refreshing: set[int] = set()
    if stale:
        # Between two cycles, about len(waits) * elapsed / bound waits age past the bound: twice that
        # drains a backlog (after a cycle that rewrote most of the queue) within about half the bound.
        elapsed = min(bound, (now - last).total_seconds()) if last is not None else bound
        cap = max(1, math.ceil(2 * len(waits) * max(elapsed, 0.0) / bound))
        if len(stale) > cap:
            oldest = datetime.min.replace(tzinfo=now.tzinfo)
            stale.sort(key=lambda entry: (entry[0] or oldest, entry[1]))
            stale = stale[:cap]
        changed += [(pk, *after) for _, pk, after in stale]
        refreshing = {pk for _, pk, _ in stale}
    if not changed:
        return 0, 0
    if connection.vendor != "postgresql":
        for pk, reason, kind, eta, since in changed:
            Workload.objects.filter(pk=pk, status=WorkloadStatus.QUEUED).update(
                pending_reason=reason, waiting_on=kind, estimated_start=eta, locality_since=since,
                pending_reason_at=now)
        return len(changed), len(refreshing)
    table = Workload._meta.db_table
    written = refreshed = 0
    for i in range(0, len(changed), _CHUNK):
        chunk = changed[i:i + _CHUNK]
        columns = [list(column) for column in zip(*chunk, strict=True)]
        with connection.cursor() as cursor:  # one array per column: a short statement, whatever the rows
            cursor.execute(
                f"UPDATE {table} AS w SET pending_reason = v.reason, waiting_on = v.kind, "
                "estimated_start = v.eta, locality_since = v.since, pending_reason_at = %s "
                "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::timestamptz[], %s::timestamptz[]) "
                "AS v(id, reason, kind, eta, since) WHERE w.id = v.id AND w.status = %s RETURNING w.id, w.xmin::text",
                [now, *columns, WorkloadStatus.QUEUED])
            versions = dict(cursor.fetchall())
        written += len(versions)
        refreshed += len(refreshing.intersection(versions))
        kept = _INPUTS.rows
        for pk, reason, kind, eta, since in chunk:  # our own write: not read again next cycle
            row = kept.get(pk)
            if pk in versions and row is not None:
                row.version = versions[pk]
                row.shown = (reason, kind, eta, since, now)
                if since != row.pending.locality_since:
                    row.pending = dataclasses.replace(row.pending, locality_since=since)
    return written, refreshed


def _apply_queues(waits: list[Wait], snapshot: Snapshot) -> int:
    """Write each pool's queue order (PoolQueue: the waits' ids in the order the policy considered
    them, so that a queue position is a place in it) where it changed; returns how many pools were
    written. One row per pool, whatever the length of its queue."""
    pool_of = {w.id: w.pool for w in snapshot.pending}
    order: dict[str, list[int]] = {}
    for d in waits:
        order.setdefault(pool_of[d.workload_id], []).append(d.workload_id)
    kept = _INPUTS
    # Another scheduler process may have written some since (leadership moves): read those again.
    stamps = dict(PoolQueue.objects.values_list("pool__name", "updated_at"))
    if kept.queues is None or stamps != kept.stamps:
        kept.queues = dict(PoolQueue.objects.values_list("pool__name", "workloads"))
        kept.stamps = stamps
    changed = {name: ids for name, ids in order.items() if kept.queues.get(name) != ids}
    changed.update({name: [] for name, ids in kept.queues.items() if ids and name not in order})
    if not changed:
        return 0
    pools = dict(ResourcePool.objects.filter(name__in=changed).values_list("name", "pk"))
    for name, ids in changed.items():
        if name in pools:
            row, _ = PoolQueue.objects.update_or_create(pool_id=pools[name], defaults={"workloads": ids})
            kept.stamps[name] = row.updated_at
        kept.queues[name] = ids
    return len(changed)


# Per ScaleUp of the last snapshot (its workload's id), the kind that asked for it and takes the answer.
_SCALE_UP_KINDS: dict[int, KindSpec] = {}


def _kinds_with(hook) -> list[KindSpec]:
    """The registered kinds' specs that have `hook(spec)`, in registration order."""
    return [spec for kind in registered_kinds() if (spec := registered_spec(kind)) is not None and hook(spec)]


def _apply_scale_up(decision: Admit | Wait, result: CycleResult) -> None:
    """The answer to a scale-up (a ScaleUp in the snapshot, under its workload's id), applied by its kind."""
    workload_id = decision.workload_id
    spec = _SCALE_UP_KINDS[workload_id]
    if isinstance(decision, Admit):
        if spec.scale_admit(workload_id=workload_id, placement=list(decision.placement)) is not None:
            result.admitted += 1
    elif isinstance(decision, Wait):
        result.waiting += 1
        spec.scale_wait(workload_id=workload_id, reason=decision.reason, waiting_on=decision.kind)


def scheduling_cycle() -> CycleResult:
    """Run one cycle: admit what fits, preempt what must make room, record why the rest waits.

    Safe to call concurrently: one leader at a time (advisory lock), and every status change is a
    compare-and-set, so a workload stopped meanwhile is simply not admitted.
    """
    with transaction.atomic():
        if not _try_leader_lock():
            return CycleResult(ran=False)
        now = timezone.now()
        # Kinds' own work before the snapshot, with the scheduler's leadership (KindSpec.before_scheduling:
        # the deployments' autoscaler and rollouts), each in its own transaction.
        for spec in _kinds_with(lambda spec: spec.before_scheduling):
            try:
                with transaction.atomic():
                    spec.before_scheduling()
            except Exception:
                logger.exception("scheduler: the %s kind's work before the cycle failed; scheduling goes on", spec.kind)
        with _INPUTS_LOCK:
            return _cycle(now)


def _cycle(now: datetime) -> CycleResult:
    """The cycle proper, under the leader lock: read, decide, write."""
    began, began_cpu = time.perf_counter(), time.process_time()
    snapshot, accels, asks = _scheduling_inputs(now=now)
    read, read_cpu = time.perf_counter(), time.process_time()
    decisions = explain_pins(explain(_schedule(snapshot, policy_options()), snapshot, accels, asks), snapshot)
    decided, decided_cpu = time.perf_counter(), time.process_time()
    fills = _INPUTS.fills
    result = CycleResult(ran=True, queued_read=_INPUTS.read)
    waits: list[Wait] = []
    scale_ups = scale_up_ids(snapshot)
    for decision in decisions:
        if isinstance(decision, Admit | Wait) and decision.workload_id in scale_ups:  # a deployment's scale-up
            _apply_scale_up(decision, result)
        elif isinstance(decision, Admit):
            admitted = workload_transition(
                workload_id=decision.workload_id, from_statuses={WorkloadStatus.QUEUED},
                to_status=WorkloadStatus.ADMITTED, reason="Admitted",
                message="Placed on " + ", ".join(sorted({p["node"] for p in decision.placement})) + ".",
                placement=decision.placement, admitted_at=now, estimated_start=None,
                locality_since=None,
            )
            if admitted is not None:
                outbox_enqueue(topic="workload.dispatch", payload={"workload_id": decision.workload_id})
                result.admitted += 1
        elif isinstance(decision, Preempt):
            # A scale-up preempts under the id of its deployment's workload.
            if workload_preempt(workload_id=decision.workload_id, preemptor_id=decision.preemptor_id,
                                message=decision.reason) is not None:
                result.preempted += 1
        elif isinstance(decision, Wait):
            result.waiting += 1
            waits.append(with_fill_time(decision, fills))
    _apply_queues([d for d in decisions if isinstance(d, Wait) and d.workload_id not in scale_ups], snapshot)
    result.waits_written, result.waits_refreshed = _apply_waits(waits, now)
    result.timings = {"read": read - began, "decide": decided - read, "write": time.perf_counter() - decided,
                      "read_cpu": read_cpu - began_cpu, "decide_cpu": decided_cpu - read_cpu,
                      "write_cpu": time.process_time() - decided_cpu}
    return result


def with_fill_time(decision: Wait, fills: dict[int, int]) -> Wait:
    """A pending workload whose datasets are cached on no node starts only after a cache fill:
    say so in its reason and push its estimated start by the expected fill time
    (CAIRN_DATASET_FILL_MBPS, an assumption: docs/data.md)."""
    missing = fills.get(decision.workload_id)
    if not missing:
        return decision
    seconds = fill_seconds(missing, float(settings.CAIRN["DATASET_FILL_MBPS"]) * 1e6)
    reason = (f"{decision.reason}; then about {max(1, round(seconds))} s to fill a node's dataset cache "
              f"({missing / 1e9:.2f} GB of its datasets are cached on no node)")
    start = decision.estimated_start + timedelta(seconds=seconds) if decision.estimated_start else None
    return dataclasses.replace(decision, reason=reason, estimated_start=start)
