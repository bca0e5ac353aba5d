"""Reads of tracking: runs, downsampled series, full-resolution pages, comparisons, CSV rows."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.db.models import Q

from . import downsample
from .models import MetricPoint, MetricRollup, MetricSummary, Param, Run


def run_summaries(*, runs: list[Run]) -> dict[int, dict[str, dict]]:
    """run id -> key -> {count, min, max, last, last_step, last_time}, in one query."""
    out: dict[int, dict[str, dict]] = {run.pk: {} for run in runs}
    for s in MetricSummary.objects.filter(run__in=runs).order_by("key"):
        out[s.run_id][s.key] = {"count": s.count, "min": s.min, "max": s.max, "last": s.last_value,
                                "first_step": s.first_step, "last_step": s.last_step,
                                "last_time": s.last_time.timestamp()}
    return out


def run_params(*, runs: list[Run]) -> dict[int, dict[str, object]]:
    out: dict[int, dict[str, object]] = {run.pk: {} for run in runs}
    for p in Param.objects.filter(run__in=runs).order_by("key"):
        out[p.run_id][p.key] = p.value
    return out


def series_read(
    *, run: Run, key: str, max_points: int = 1000, step_min: int | None = None, step_max: int | None = None,
    time_min: datetime | None = None, time_max: datetime | None = None,
) -> dict:
    """Points of one series in a step (and optionally time) range, at most `max_points` of them.

    When the range holds more points than that, it answers buckets keeping each bucket's first,
    last, min and max point (built from rollups, exact), and `points` are their distinct points."""
    summary = MetricSummary.objects.filter(run=run, key=key).first()
    empty = {"key": key, "downsampled": False, "count": 0, "points": [], "buckets": None}
    if summary is None:
        return empty
    lo = summary.first_step if step_min is None else max(step_min, summary.first_step)
    hi = summary.last_step if step_max is None else min(step_max, summary.last_step)
    if lo > hi:
        return empty
    if time_min is not None or time_max is not None:
        return _series_by_time(run=run, key=key, lo=lo, hi=hi, max_points=max_points, time_min=time_min,
                               time_max=time_max)
    plan = downsample.plan(lo, hi, max_points)
    aggs = _plan_aggregates(run=run, key=key, plan=plan)
    count = sum(agg[0] for agg in aggs)
    if count <= max_points:
        rows = (MetricPoint.objects.filter(run=run, key=key, step__gte=lo, step__lte=hi)
                .order_by("step", "id").values_list("step", "value"))
        return {"key": key, "downsampled": False, "count": count, "points": [list(r) for r in rows], "buckets": None}
    buckets = downsample.assemble(plan, aggs)
    return {"key": key, "downsampled": True, "count": count, "bucket_width": plan.width, "buckets": buckets,
            "points": downsample.bucket_points(buckets)}


def _plan_aggregates(*, run: Run, key: str, plan: downsample.Plan) -> list[downsample.Agg]:
    aggs: list[downsample.Agg] = []
    if plan.blocks:
        condition = Q()
        for level, first, last in plan.blocks:
            condition |= Q(level=level, bucket__gte=first, bucket__lte=last)
        aggs.extend(
            MetricRollup.objects.filter(condition, run=run, key=key).values_list(
                "count", "first_step", "first_value", "last_step", "last_value", "min_step", "min_value",
                "max_step", "max_value",
            )
        )
    if plan.raw:
        condition = Q()
        for raw_lo, raw_hi in plan.raw:
            condition |= Q(step__gte=raw_lo, step__lte=raw_hi)
        rows = MetricPoint.objects.filter(condition, run=run, key=key).order_by("step", "id").values_list("step", "value")
        aggs.extend(downsample.point_agg(step, value) for step, value in rows)
    return aggs


def _series_by_time(*, run, key, lo, hi, max_points, time_min, time_max) -> dict:
    """Time-range zoom: rollups are by step, so this path reads the raw points of the range."""
    qs = MetricPoint.objects.filter(run=run, key=key, step__gte=lo, step__lte=hi)
    if time_min is not None:
        qs = qs.filter(time__gte=time_min)
    if time_max is not None:
        qs = qs.filter(time__lte=time_max)
    rows = list(qs.order_by("step", "id").values_list("step", "value"))
    if len(rows) <= max_points:
        return {"key": key, "downsampled": False, "count": len(rows), "points": [list(r) for r in rows],
                "buckets": None}
    plan = downsample.plan(rows[0][0], rows[-1][0], max_points)
    buckets = downsample.assemble(plan, (downsample.point_agg(s, v) for s, v in rows))
    return {"key": key, "downsampled": True, "count": len(rows), "bucket_width": plan.width, "buckets": buckets,
            "points": downsample.bucket_points(buckets)}


def points_page(*, run: Run, key: str, after_step: int | None, after_id: int | None, limit: int) -> dict:
    """Full resolution, in step order, keyset-paged by (step, id)."""
    qs = MetricPoint.objects.filter(run=run, key=key)
    if after_step is not None:
        qs = qs.filter(Q(step__gt=after_step) | Q(step=after_step, id__gt=after_id or 0))
    rows = list(qs.order_by("step", "id").values_list("step", "value", "time", "id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    cursor = {"after_step": rows[-1][0], "after_id": rows[-1][3]} if more else None
    return {"key": key, "points": [[s, v, t.timestamp()] for s, v, t, _ in rows], "next": cursor}


def csv_rows(*, run: Run, keys: list[str] | None) -> Iterator[tuple]:
    """(key, step, value, time ISO) of the run, by key then step, streamed from a server-side cursor."""
    qs = MetricPoint.objects.filter(run=run)
    if keys:
        qs = qs.filter(key__in=keys)
    for key, step, value, when in qs.order_by("key", "step", "id").values_list("key", "step", "value", "time").iterator(
        chunk_size=5000
    ):
        yield key, step, repr(value), when.isoformat()


def runs_compare(*, runs: list[Run], only_differs: bool, keys: list[str], max_points: int) -> dict:
    """Params table, metric summaries, parallel-coordinates data and overlaid curves of runs."""
    params = run_params(runs=runs)
    summaries = run_summaries(runs=runs)
    param_keys = sorted({k for p in params.values() for k in p})
    if only_differs and len(runs) > 1:
        param_keys = [k for k in param_keys
                      if len({repr(params[r.pk].get(k, _MISSING)) for r in runs}) > 1]
    metric_keys = sorted({k for s in summaries.values() for k in s})
    table = [{"run": r.pk, "name": r.name, "params": {k: params[r.pk].get(k) for k in param_keys}} for r in runs]
    # Parallel coordinates: one axis per shown param, then the last value of every metric.
    dimensions = [{"name": k, "kind": "param"} for k in param_keys]
    dimensions += [{"name": k, "kind": "metric"} for k in metric_keys]
    lines = [
        {"run": r.pk, "values": [params[r.pk].get(k) for k in param_keys]
         + [summaries[r.pk].get(k, {}).get("last") for k in metric_keys]}
        for r in runs
    ]
    curves = {key: {str(r.pk): series_read(run=r, key=key, max_points=max_points)["points"] for r in runs}
              for key in keys}
    return {
        "runs": [{"id": r.pk, "name": r.name, "status": r.status} for r in runs],
        "params": {"keys": param_keys, "rows": table},
        "summaries": {str(r.pk): summaries[r.pk] for r in runs},
        "parallel_coordinates": {"dimensions": dimensions, "lines": lines},
        "curves": curves,
    }


_MISSING = object()
