"""Reads about quotas and usage."""
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from apps.clusters.models import Node

from .models import BudgetPeriod, Quota, UsageRecord

# quota_usage's view of the workloads, given by the app that owns them at AppConfig.ready()
# (quotas sits below workloads and may not import it); each reader takes project ids:
#   "allocated": what their active workloads hold, per (project, pool): rows {"project_id",
#                "pool_id", "gpu", "cpu", "mem"} (summed over replicas);
#   "queued":    their queued workloads, one row each: {"project_id", "pool_id", "waiting_on",
#                "replicas", "gpu_milli", "cpu_milli", "memory_mb"}.
workload_usage_readers: dict[str, Callable[[set[int]], Iterable[dict]]] = {}


def budget_period_start(period: str, now: datetime) -> datetime:
    """Start of the current budget period (UTC calendar day, ISO week or month)."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == BudgetPeriod.DAY:
        return day
    if period == BudgetPeriod.WEEK:
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def budget_period_end(period: str, start: datetime) -> datetime:
    """End (exclusive) of the budget period that starts at `start`."""
    if period == BudgetPeriod.DAY:
        return start + timedelta(days=1)
    if period == BudgetPeriod.WEEK:
        return start + timedelta(days=7)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


def _gpu_seconds(records, *, project_id: int, pool_id: int, since: datetime, now: datetime) -> float:
    total = 0.0
    for rec_project, rec_pool, gpu_milli, started_at, ended_at in records:
        if (rec_project, rec_pool) != (project_id, pool_id):
            continue
        start = max(started_at, since)
        end = ended_at or now
        if end > start:
            total += gpu_milli / 1000 * (end - start).total_seconds()
    return total


def _usage_rows(pairs: set[tuple[int, int]], since: datetime):
    """GPU ledger rows of these (project, pool) pairs overlapping [since, now), in one query."""
    if not pairs:
        return []
    return list(
        UsageRecord.objects.filter(
            project_id__in={p for p, _ in pairs}, pool_id__in={q for _, q in pairs}, gpu_milli__gt=0
        )
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .values_list("project_id", "pool_id", "gpu_milli", "started_at", "ended_at")
    )


def usage_gpu_seconds(*, project_id: int, pool_id: int, since: datetime, now: datetime) -> float:
    """Allocated GPU-seconds of a project in a pool since `since` (open records count up to now)."""
    rows = _usage_rows({(project_id, pool_id)}, since)
    return _gpu_seconds(rows, project_id=project_id, pool_id=pool_id, since=since, now=now)


def quota_usage(*, quotas: Iterable[Quota], now: datetime | None = None, queued: bool = True) -> dict[int, dict]:
    """Per quota: what its project's active workloads hold in the pool (used, borrowed above
    nominal, nominal left to lend), what its queued work asks for and waits on, and its GPU-hours
    this budget period (and what is left). `queued=False` skips the queued work (the scheduler
    reads it otherwise)."""
    now = now or timezone.now()
    quotas = list(quotas)
    pairs = {(q.project_id, q.pool_id) for q in quotas}
    project_ids = {p for p, _ in pairs}
    allocated: dict[tuple[int, int], dict] = {}
    if pairs:
        for row in workload_usage_readers["allocated"](project_ids):
            allocated[(row["project_id"], row["pool_id"])] = row
    queued_rows: dict[tuple[int, int], list[dict]] = {}
    if pairs and queued:
        for row in workload_usage_readers["queued"](project_ids):
            queued_rows.setdefault((row["project_id"], row["pool_id"]), []).append(row)
    starts = {q.pk: budget_period_start(q.budget_period, now) for q in quotas}
    ledger = _usage_rows(pairs, min(starts.values())) if starts else []
    result = {}
    for quota in quotas:
        row = allocated.get((quota.project_id, quota.pool_id), {})
        since = starts[quota.pk]
        gpu_hours = _gpu_seconds(ledger, project_id=quota.project_id, pool_id=quota.pool_id, since=since,
                                 now=now) / 3600
        used = row.get("gpu") or 0
        lendable = max(quota.nominal_gpu_milli - used, 0)
        if quota.lending_limit_gpu_milli is not None:
            lendable = min(lendable, quota.lending_limit_gpu_milli)
        budget = None if quota.gpu_hour_budget is None else float(quota.gpu_hour_budget)
        free = {"gpu": quota.nominal_gpu_milli - used, "cpu": quota.nominal_cpu_milli - (row.get("cpu") or 0),
                "memory": quota.nominal_memory_mb - (row.get("mem") or 0)}
        waits = _waits(queued_rows.get((quota.project_id, quota.pool_id), []), free=free)
        result[quota.pk] = {
            "allocated_gpu_milli": used,
            "allocated_cpu_milli": row.get("cpu") or 0,
            "allocated_memory_mb": row.get("mem") or 0,
            "used_gpu_milli": used,
            "borrowed_gpu_milli": max(used - quota.nominal_gpu_milli, 0),  # used above nominal
            "lendable_gpu_milli": lendable,  # unused nominal others may borrow
            # What its queued work asks for, by what it waits on (a Workload's waiting_on)
            "queued_gpu_milli": sum(w["gpu_milli"] for w in waits),
            "queued_cpu_milli": sum(w["cpu_milli"] for w in waits),
            "queued_memory_mb": sum(w["memory_mb"] for w in waits),
            "waiting_gpu_milli": {w["waiting_on"]: w["gpu_milli"] for w in waits},
            "waiting": waits,
            "gpu_hours_this_period": round(gpu_hours, 3),
            "gpu_hour_budget": budget,
            "budget_left_gpu_hours": None if budget is None else round(max(budget - gpu_hours, 0.0), 3),
            "period_start": since,
            "period_end": budget_period_end(quota.budget_period, since),
        }
    return result


RESOURCES = ("gpu", "cpu", "memory")
_QUOTA_WAITS = {"quota_limit", "quota_lent", "quota_lendable", "quota_none"}

# What a workload's waiting_on means, in words (the admin's "queued, waiting on" column): the
# scheduler, which decides the waits, fills it at AppConfig.ready() (quotas sits below scheduling
# and may not import it). A kind missing here shows as it is stored.
wait_kind_labels: dict[str, str] = {}


def _waits(rows: list[dict], *, free: dict[str, int]) -> list[dict]:
    """Queued work grouped by what it waits on: what it asks for (GPU, CPU, memory) and, for waits
    on quota, which resources: those a workload asks for beyond its project's free nominal (or,
    when all fit in the nominal and it waits because others borrowed it, those it asks for)."""
    groups: dict[str, dict] = {}
    for row in rows:
        kind = row["waiting_on"] or "undecided"
        need = {"gpu": row["gpu_milli"] * row["replicas"], "cpu": row["cpu_milli"] * row["replicas"],
                "memory": row["memory_mb"] * row["replicas"]}
        group = groups.setdefault(kind, {"waiting_on": kind, "workloads": 0, "gpu_milli": 0, "cpu_milli": 0,
                                         "memory_mb": 0, "resources": set()})
        group["workloads"] += 1
        group["gpu_milli"] += need["gpu"]
        group["cpu_milli"] += need["cpu"]
        group["memory_mb"] += need["memory"]
        if kind in _QUOTA_WAITS:
            short = {r for r in RESOURCES if need[r] > 0 and need[r] > free[r]}
            group["resources"] |= short or {r for r in RESOURCES if need[r] > 0}
        elif kind == "budget":
            group["resources"].add("gpu")
    out = [{**g, "resources": [r for r in RESOURCES if r in g["resources"]]} for g in groups.values()]
    return sorted(out, key=lambda g: (-g["workloads"], g["waiting_on"]))


def quota_beyond_capacity(*, pool, gpu_milli: int | None, cpu_milli: int | None,
                          memory_mb: int | None) -> dict[str, str]:
    """Nominal amounts a quota could never get: more than every node of its pool holds together
    (cordoned ones included), as {model field: message}. A pool with no nodes yet says nothing
    (its capacity is unknown until nodes join). Refused by the API and the admin alike (issue 46,
    item 12): a guarantee of 16 CPUs on a 2-core pool promises what no scheduler can give."""
    nodes = list(Node.objects.filter(pool=pool).values_list("gpu_count", "cpu_milli_allocatable",
                                                            "memory_mb_allocatable"))
    if not nodes:
        return {}
    total_gpu = sum(n[0] for n in nodes) * 1000
    total_cpu = sum(n[1] for n in nodes)
    total_mem = sum(n[2] for n in nodes)
    where = f"pool '{pool.name}' ({len(nodes)} node{'s' if len(nodes) != 1 else ''})"
    found = {}
    if gpu_milli and gpu_milli > total_gpu:
        found["nominal_gpu_milli"] = (f"{gpu_milli / 1000:g} GPUs is more than {where} has: "
                                      f"{total_gpu / 1000:g} GPUs in all.")
    if cpu_milli and cpu_milli > total_cpu:
        found["nominal_cpu_milli"] = (f"{cpu_milli / 1000:g} CPU cores is more than {where} has: "
                                      f"{total_cpu / 1000:g} cores in all.")
    if memory_mb and memory_mb > total_mem:
        found["nominal_memory_mb"] = (f"{memory_mb / 1024:.4g} GiB of memory is more than {where} has: "
                                      f"{total_mem / 1024:.4g} GiB in all.")
    return found
