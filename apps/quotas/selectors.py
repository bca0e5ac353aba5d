"""Reads about quotas and usage."""
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import F, Q, Sum
from django.utils import timezone

from apps.workloads.choices import ACTIVE

from .models import BudgetPeriod, Quota, UsageRecord


def budget_period_start(period: str, now: datetime) -> datetime:
    """Start of the current budget period (UTC calendar day, ISO week or month)."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == BudgetPeriod.DAY:
        return day
    if period == BudgetPeriod.WEEK:
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def usage_gpu_seconds(*, project_id: int, pool_id: int, since: datetime, now: datetime) -> float:
    """Allocated GPU-seconds of a project in a pool since `since` (open records count up to now)."""
    total = 0.0
    records = UsageRecord.objects.filter(project_id=project_id, pool_id=pool_id, gpu_milli__gt=0).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=since)
    )
    for gpu_milli, started_at, ended_at in records.values_list("gpu_milli", "started_at", "ended_at"):
        start = max(started_at, since)
        end = ended_at or now
        if end > start:
            total += gpu_milli / 1000 * (end - start).total_seconds()
    return total


def quota_usage(*, quotas: Iterable[Quota], now: datetime | None = None) -> dict[int, dict]:
    """Per quota: what its project's active workloads hold in the pool, and GPU-hours this period."""
    from apps.workloads.models import Workload

    now = now or timezone.now()
    quotas = list(quotas)
    pairs = {(q.project_id, q.pool_id) for q in quotas}
    allocated: dict[tuple[int, int], dict] = {}
    if pairs:
        rows = (
            Workload.objects.filter(status__in=ACTIVE, project_id__in={p for p, _ in pairs})
            .values("project_id", "pool_id")
            .annotate(
                gpu=Sum(F("gpu_milli") * F("replicas")),
                cpu=Sum(F("cpu_milli") * F("replicas")),
                mem=Sum(F("memory_mb") * F("replicas")),
            )
        )
        for row in rows:
            allocated[(row["project_id"], row["pool_id"])] = row
    result = {}
    for quota in quotas:
        row = allocated.get((quota.project_id, quota.pool_id), {})
        since = budget_period_start(quota.budget_period, now)
        gpu_hours = usage_gpu_seconds(project_id=quota.project_id, pool_id=quota.pool_id, since=since, now=now) / 3600
        result[quota.pk] = {
            "allocated_gpu_milli": row.get("gpu") or 0,
            "allocated_cpu_milli": row.get("cpu") or 0,
            "allocated_memory_mb": row.get("mem") or 0,
            "gpu_hours_this_period": round(gpu_hours, 3),
            "period_start": since,
        }
    return result
