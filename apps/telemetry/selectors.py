"""Reads of telemetry: per-node and per-workload series over raw samples and rollups."""
from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from apps.deployments.autoscaler import Sample
from apps.workloads.models import Workload

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


def serve_concurrency_window(workload_ids: list[int], since: float) -> dict[int, list]:
    """The gateway's `serve.concurrency` samples of these deployments since `since` (Unix seconds),
    as the autoscaler reads them: {workload_id: [Sample(time, source=gateway process, value)]}."""
    rows = TelemetrySample.objects.filter(
        workload_id__in=workload_ids, metric="serve.concurrency",
        time__gte=datetime.fromtimestamp(since, tz=UTC)).values_list("workload_id", "time", "node", "value")
    out: dict[int, list] = {}
    for workload_id, when, node, value in rows:
        out.setdefault(workload_id, []).append(Sample(time=when.timestamp(), source=node, value=value))
    return out


def workload_gpu_utilisation(workload_ids: list[int], since: datetime) -> dict[int, float]:
    """The highest latest GPU utilisation (percent) among the GPUs each workload uses, from raw
    samples at or after `since`: those attributed to it (DCGM's per-pod labels), and those of the
    GPUs its placement names (node and GPU index, as the local sampler records them). The
    notebooks' idle culler reads it (registered in apps.py)."""
    mine: dict[tuple[str, int], set[int]] = {}
    for workload_id, placement in Workload.objects.filter(pk__in=workload_ids).values_list("pk", "placement"):
        for entry in placement or []:
            if isinstance(entry, dict) and isinstance(entry.get("node"), str):
                for gpu in entry.get("gpus") or []:
                    if isinstance(gpu, int):
                        mine.setdefault((entry["node"], gpu), set()).add(workload_id)
    scope = Q(workload_id__in=workload_ids)
    if mine:
        scope |= Q(node__in={node for node, _ in mine}, gpu__in={gpu for _, gpu in mine})
    rows = (TelemetrySample.objects.filter(scope, metric="gpu.util_percent", time__gte=since)
            .order_by("workload_id", "node", "gpu", "-time").values_list("workload_id", "node", "gpu", "value"))
    latest: dict[tuple, float] = {}
    for workload_id, node, gpu, value in rows:
        latest.setdefault((workload_id, node, gpu), value)
    out: dict[int, float] = {}
    for (workload_id, node, gpu), value in latest.items():
        owners = {workload_id} if workload_id in workload_ids else mine.get((node, gpu), set())
        for owner in owners:
            out[owner] = max(value, out.get(owner, value))
    return out
