"""Reads of tracking: runs, downsampled series, full-resolution pages, comparisons, CSV rows."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
from django.db.models import Exists, OuterRef, Q, QuerySet

from apps.workloads.kinds import kind_spec, registered_kinds

from . import downsample
from . import points as points_
from .models import MetricChunk, MetricRollup, MetricSummary, Param, Run

CHUNK_COLUMNS = ("id", "step_data", "value_data", "time_data")


def runs_listed(queryset: QuerySet[Run]) -> QuerySet[Run]:
    """The runs lists show. Every attempt gets a run at launch, in case it logs; for kinds whose
    spec says not to list empty runs (notebooks, deployments: most never log, and an empty run per
    notebook would bury the training runs) it is left out until it holds a metric or a param.
    Training runs and standalone runs always show."""
    holds_data = (Q(Exists(MetricSummary.objects.filter(run=OuterRef("pk"))))
                  | Q(Exists(Param.objects.filter(run=OuterRef("pk")))))
    quiet = [kind for kind in registered_kinds() if not kind_spec(kind).lists_empty_runs]
    return queryset.filter(~Q(workload__kind__in=quiet) | holds_data)


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
        raw = raw_points(run=run, key=key, lo=lo, hi=hi)
        return {"key": key, "downsampled": False, "count": count, "points": raw.pairs(), "buckets": None}
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
    for raw_lo, raw_hi in plan.raw:
        raw = raw_points(run=run, key=key, lo=raw_lo, hi=raw_hi)
        aggs.extend(downsample.raw_aggregates(raw.steps, raw.values, plan.width))
    return aggs


def raw_points(*, run: Run, key: str, lo: int, hi: int) -> points_.Points:
    """The stored points of one key with lo <= step <= hi, sorted by (step, order)."""
    chunks = MetricChunk.objects.filter(run=run, key=key, last_step__gte=lo, first_step__lte=hi)
    return points_.decode(chunks.values_list(*CHUNK_COLUMNS), lo=lo, hi=hi)


def ordered_points(*, run: Run, key: str, after: tuple[int, int] | None = None, want: int = 5000):
    """Every point of one key after the cursor (step, order), in order, as successive Points.

    Chunks are read in first_step order, about `want` points at a time; points below the next
    unread chunk's first step are final (no unread chunk holds a smaller step) and are yielded."""
    meta = MetricChunk.objects.filter(run=run, key=key)
    if after is not None:
        meta = meta.filter(last_step__gte=after[0])
    meta = meta.order_by("first_step", "id").values_list("id", "first_step", "count")
    pending = points_.Points.empty()
    position: tuple[int, int] | None = None
    page: list[tuple[int, int, int]] = []
    while True:
        if len(page) < 2:  # keep one chunk ahead: its first step bounds what is final
            query = meta if position is None else meta.filter(
                Q(first_step__gt=position[0]) | Q(first_step=position[0], id__gt=position[1]))
            more = list(query[:512])
            if more:
                position = (more[-1][1], more[-1][0])
            page.extend(more)
        if not page:
            if len(pending):
                yield pending
            return
        taken, total = [], 0
        while page and (total < want or not taken):
            chunk_id, _, count = page.pop(0)
            taken.append(chunk_id)
            total += count
        rows = MetricChunk.objects.filter(id__in=taken).values_list(*CHUNK_COLUMNS)
        pending = pending.concat(points_.decode(rows, after=after)).sorted()
        if page:
            final = int(np.searchsorted(pending.steps, page[0][1], side="left"))
            if final:
                yield pending.take(slice(0, final))
                pending = pending.take(slice(final, None))
        else:
            if len(pending):
                yield pending
            pending = points_.Points.empty()


def _series_by_time(*, run, key, lo, hi, max_points, time_min, time_max) -> dict:
    """Time-range zoom: rollups are by step, so this path reads the raw points of the range."""
    raw = raw_points(run=run, key=key, lo=lo, hi=hi)
    keep = np.ones(len(raw), dtype=bool)
    if time_min is not None:
        keep &= raw.times >= time_min.timestamp()
    if time_max is not None:
        keep &= raw.times <= time_max.timestamp()
    raw = raw.take(keep)
    if len(raw) <= max_points:
        return {"key": key, "downsampled": False, "count": len(raw), "points": raw.pairs(), "buckets": None}
    plan = downsample.plan(int(raw.steps[0]), int(raw.steps[-1]), max_points)
    buckets = downsample.assemble(plan, downsample.raw_aggregates(raw.steps, raw.values, plan.width))
    return {"key": key, "downsampled": True, "count": len(raw), "bucket_width": plan.width, "buckets": buckets,
            "points": downsample.bucket_points(buckets)}


def points_page(*, run: Run, key: str, after_step: int | None, after_id: int | None, limit: int) -> dict:
    """Full resolution, in step order, keyset-paged by (step, id); `id` orders equal steps."""
    after = None if after_step is None else (after_step, after_id or 0)
    page = points_.Points.empty()
    for part in ordered_points(run=run, key=key, after=after, want=limit + 1):
        page = page.concat(part)
        if len(page) > limit:
            break
    more = len(page) > limit
    page = page.take(slice(0, limit))
    cursor = {"after_step": int(page.steps[-1]), "after_id": int(page.order[-1])} if more else None
    return {"key": key, "points": [list(p) for p in zip(page.steps.tolist(), page.values.tolist(), page.times.tolist(),
                                                        strict=True)], "next": cursor}


def csv_rows(*, run: Run, keys: list[str] | None) -> Iterator[tuple]:
    """(key, step, value, time ISO) of the run, by key then step, read chunk by chunk."""
    names = MetricSummary.objects.filter(run=run)
    if keys:
        names = names.filter(key__in=keys)
    for key in names.order_by("key").values_list("key", flat=True):
        for part in ordered_points(run=run, key=key):
            for step, value, when in zip(part.steps.tolist(), part.values.tolist(), part.times.tolist(), strict=True):
                yield key, step, repr(value), datetime.fromtimestamp(when, tz=UTC).isoformat()


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
