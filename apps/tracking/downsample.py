"""Pure downsampling over step rollups. No ORM, no I/O: unit- and property-tested directly.

Points of one series are aggregated at ingestion into blocks of 16**L steps (levels 2..5).
Each aggregate keeps count, first, last, min and max *with their steps*. Two aggregates merge
exactly, so a chart bucket built from whole blocks (plus the few raw points at the edges of
the requested range) has exactly the extremes of the raw points inside it: spikes survive.

Raw points are aggregated with numpy (`raw_aggregates`). An aggregate is a tuple:
  (count, first_step, first_value, last_step, last_value, min_step, min_value, max_step, max_value)
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .choices import ROLLUP_BASE, ROLLUP_LEVELS

Agg = tuple[int, int, float, int, float, int, float, int, float]


def point_agg(step: int, value: float) -> Agg:
    return (1, step, value, step, value, step, value, step, value)


def merge(a: Agg | None, b: Agg) -> Agg:
    """Combine two aggregates. Ties: first keeps the earlier one, last the later one, extremes the first seen."""
    if a is None:
        return b
    first = (a[1], a[2]) if a[1] <= b[1] else (b[1], b[2])
    last = (b[3], b[4]) if b[3] >= a[3] else (a[3], a[4])
    low = (a[5], a[6]) if a[6] <= b[6] else (b[5], b[6])
    high = (a[7], a[8]) if a[8] >= b[8] else (b[7], b[8])
    return (a[0] + b[0], *first, *last, *low, *high)


def rollups(points: Iterable[tuple[str, int, float]]) -> dict[tuple[str, int, int], Agg]:
    """(key, level, bucket) -> aggregate of the given points, for every rollup level."""
    by_key: dict[str, list[tuple[int, float]]] = {}
    for key, step, value in points:
        rows = by_key.get(key)
        if rows is None:
            by_key[key] = rows = []
        rows.append((step, value))
    out: dict[tuple[str, int, int], Agg] = {}
    for key, rows in by_key.items():
        rows.sort(key=_step_of)  # stable: equal steps keep their arrival order
        for level, bucket, agg in key_rollups(rows):
            out[(key, level, bucket)] = agg
    return out


def _step_of(row) -> int:
    return row[0]


def key_rollups(rows) -> list[tuple[int, int, Agg]]:
    """[(level, bucket, aggregate)] of one key's points, `rows` = [(step, value, ...)] sorted by step.

    The finest level is one pass over the points; each coarser level merges the finer one's
    blocks, which nest exactly (16 blocks of level L make one of level L+1). Ties: first keeps
    the earliest point of the smallest step, last the latest of the largest, min and max the
    first seen."""
    shift = ROLLUP_BASE.bit_length() - 1
    finest = shift * ROLLUP_LEVELS[0]  # levels are consecutive from the finest
    finest_blocks: list[tuple[int, Agg]] = []
    current = None
    count = first_step = first_value = last_step = last_value = min_step = min_value = max_step = max_value = 0
    for row in rows:
        step, value = row[0], row[1]
        bucket = step >> finest
        if bucket != current:
            if current is not None:
                finest_blocks.append((current, (count, first_step, first_value, last_step, last_value, min_step,
                                                min_value, max_step, max_value)))
            current, count = bucket, 1
            first_step = last_step = min_step = max_step = step
            first_value = last_value = min_value = max_value = value
            continue
        count += 1
        last_step, last_value = step, value
        if value < min_value:
            min_step, min_value = step, value
        elif value > max_value:
            max_step, max_value = step, value
    if current is not None:
        finest_blocks.append((current, (count, first_step, first_value, last_step, last_value, min_step, min_value,
                                        max_step, max_value)))
    out = [(ROLLUP_LEVELS[0], bucket, agg) for bucket, agg in finest_blocks]
    finer = finest_blocks
    for level in ROLLUP_LEVELS[1:]:
        coarser: list[tuple[int, Agg]] = []
        for bucket, agg in finer:
            parent = bucket >> shift
            if coarser and coarser[-1][0] == parent:
                coarser[-1] = (parent, merge(coarser[-1][1], agg))
            else:
                coarser.append((parent, agg))
        out.extend((level, bucket, agg) for bucket, agg in coarser)
        finer = coarser
    return out


def cover(lo: int, hi: int, level: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """Cover steps [lo, hi] with whole aligned blocks of levels <= `level` plus raw step ranges.

    Returns ([(level, first_bucket, last_bucket), ...], [(raw_lo, raw_hi), ...]). Raw ranges
    are shorter than one block of the finest level each and there are at most two of them."""
    if lo > hi:
        return [], []
    if level == 0:
        return [], [(lo, hi)]
    finer = level - 1 if level - 1 in ROLLUP_LEVELS else 0
    width = ROLLUP_BASE**level
    first = -(-lo // width)
    last = (hi + 1) // width - 1
    if first > last:
        return cover(lo, hi, finer)
    left_blocks, left_raw = cover(lo, first * width - 1, finer)
    right_blocks, right_raw = cover((last + 1) * width, hi, finer)
    return [*left_blocks, (level, first, last), *right_blocks], [*left_raw, *right_raw]


@dataclass(frozen=True)
class Plan:
    lo: int
    hi: int
    width: int  # steps per output bucket; buckets are aligned to multiples of it
    level: int  # the coarsest rollup level used (0 = raw points only)
    blocks: list[tuple[int, int, int]]
    raw: list[tuple[int, int]]


def plan(lo: int, hi: int, max_points: int) -> Plan:
    """How to answer a read of steps [lo, hi] with at most `max_points` points (>= 8)."""
    buckets = max(1, max_points // 4 - 1)  # alignment can add one bucket; each bucket gives <= 4 points
    span = hi - lo + 1
    ideal = max(1, math.ceil(span / buckets))
    # The coarsest rollup level whose block is at most 1.5x the ideal bucket width: buckets stay
    # within 2/3 of the requested count, and 16x fewer rows are read than one level finer.
    level = 0
    for candidate in ROLLUP_LEVELS:
        if ROLLUP_BASE**candidate <= ideal * 3 // 2:
            level = candidate
    block = ROLLUP_BASE**level
    width = math.ceil(ideal / block) * block
    blocks, raw = cover(lo, hi, level)
    return Plan(lo=lo, hi=hi, width=width, level=level, blocks=blocks, raw=raw)


def raw_aggregates(steps: np.ndarray, values: np.ndarray, width: int) -> list[Agg]:
    """One aggregate per block of `width` steps of raw points sorted by step (ties in arrival
    order), the same as merging their point_agg one by one, in numpy."""
    if not len(steps):
        return []
    groups = steps // width
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    ends = np.concatenate((starts[1:], [len(steps)])) - 1
    counts = ends - starts + 1
    lows, highs = np.minimum.reduceat(values, starts), np.maximum.reduceat(values, starts)
    group = np.repeat(np.arange(len(starts)), counts)
    index = np.arange(len(steps))
    low_at = np.minimum.reduceat(np.where(values == lows[group], index, len(steps)), starts)
    high_at = np.minimum.reduceat(np.where(values == highs[group], index, len(steps)), starts)
    return list(zip(counts.tolist(), steps[starts].tolist(), values[starts].tolist(), steps[ends].tolist(),
                    values[ends].tolist(), steps[low_at].tolist(), values[low_at].tolist(), steps[high_at].tolist(),
                    values[high_at].tolist(), strict=True))


def assemble(plan: Plan, aggs: Iterable[Agg]) -> list[dict]:
    """Merge aggregates (rollup rows and single raw points) into the plan's output buckets."""
    by_bucket: dict[int, Agg] = {}
    for agg in aggs:
        index = agg[1] // plan.width  # blocks never straddle a bucket boundary
        by_bucket[index] = merge(by_bucket.get(index), agg)
    out = []
    for index in sorted(by_bucket):
        agg = by_bucket[index]
        out.append({
            "start": max(index * plan.width, plan.lo),
            "end": min((index + 1) * plan.width - 1, plan.hi),
            "count": agg[0],
            "first": [agg[1], agg[2]],
            "last": [agg[3], agg[4]],
            "min": [agg[5], agg[6]],
            "max": [agg[7], agg[8]],
        })
    return out


def bucket_points(buckets: list[dict]) -> list[list]:
    """The distinct points of the buckets, by step: what a chart draws."""
    seen: dict[tuple[int, float], None] = {}
    for bucket in buckets:
        for name in ("first", "min", "max", "last"):
            step, value = bucket[name]
            seen.setdefault((step, value), None)
    return [[step, value] for step, value in sorted(seen, key=lambda p: p[0])]
