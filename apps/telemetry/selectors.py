"""Reads of telemetry: per-node and per-workload series over raw samples and rollups."""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from .models import TelemetryRollup, TelemetrySample


def telemetry_series(
    *, node: str | None = None, workload_id: int | None = None, metric: str, gpu: int | None = None,
    since: datetime | None = None, until: datetime | None = None, max_points: int = 500,
) -> dict:
    """One line per GPU (gpu None = node-level), bucketed to at most `max_points` points of
    [time, avg, min, max]. Old ranges come from rollups, recent ones from raw samples."""
    until = until or timezone.now()
    since = since or until - timedelta(hours=1)
    scope = Q(node=node) if node is not None else Q(workload_id=workload_id)
    if gpu is not None:
        scope &= Q(gpu=gpu)
    width = max((until - since).total_seconds() / max_points, 1.0)
    rows = [(t, g, 1, v, v, v) for t, g, v in TelemetrySample.objects.filter(
        scope, metric=metric, time__gte=since, time__lte=until).values_list("time", "gpu", "value")]
    rows += list(TelemetryRollup.objects.filter(scope, metric=metric, bucket_start__gte=since, bucket_start__lte=until)
                 .values_list("bucket_start", "gpu", "count", "sum", "min", "max"))
    buckets: dict[tuple, list] = {}
    for when, g, count, total, low, high in rows:
        index = int((when - since).total_seconds() // width)
        b = buckets.get((g, index))
        if b is None:
            buckets[(g, index)] = [count, total, low, high]
        else:
            b[0] += count
            b[1] += total
            b[2] = min(b[2], low)
            b[3] = max(b[3], high)
    lines: dict[int | None, list] = {}
    for (g, index), (count, total, low, high) in sorted(buckets.items(), key=lambda kv: (kv[0][0] is None, kv[0])):
        lines.setdefault(g, []).append([(since + timedelta(seconds=index * width)).timestamp(), total / count, low, high])
    return {"metric": metric, "since": since.isoformat(), "until": until.isoformat(), "bucket_seconds": width,
            "series": [{"gpu": g, "points": pts} for g, pts in lines.items()]}


def telemetry_metrics(*, node: str | None = None, workload_id: int | None = None) -> list[str]:
    scope = Q(node=node) if node is not None else Q(workload_id=workload_id)
    names = set(TelemetrySample.objects.filter(scope).values_list("metric", flat=True).distinct())
    names |= set(TelemetryRollup.objects.filter(scope).values_list("metric", flat=True).distinct())
    return sorted(names)


def telemetry_latest(
    *, metrics: Iterable[str], since: datetime, nodes: Iterable[str] | None = None, before: datetime | None = None,
) -> dict[tuple[str, int | None, str], tuple[datetime, float]]:
    """The latest raw sample per (node, gpu, metric) at or after `since` (and before `before`):
    {(node, gpu, metric): (time, value)}. One query (DISTINCT ON on PostgreSQL)."""
    rows = TelemetrySample.objects.filter(metric__in=list(metrics), time__gte=since)
    if nodes is not None:
        rows = rows.filter(node__in=list(nodes))
    if before is not None:
        rows = rows.filter(time__lt=before)
    fields = ("node", "gpu", "metric", "time", "value")
    if connection.vendor == "postgresql":
        rows = rows.order_by("node", "gpu", "metric", "-time").distinct("node", "gpu", "metric")
        return {(n, g, m): (t, v) for n, g, m, t, v in rows.values_list(*fields)}
    latest: dict = {}
    for n, g, m, t, v in rows.order_by("time").values_list(*fields):
        latest[(n, g, m)] = (t, v)
    return latest
