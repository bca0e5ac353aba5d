"""Downsampling keeps every bucket's extremes: property-based, against brute force over raw points."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.tracking import downsample
from apps.tracking.choices import ROLLUP_LEVELS

values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@st.composite
def series(draw):
    steps = draw(st.lists(st.integers(min_value=0, max_value=200_000), min_size=1, max_size=400))
    return [(step, draw(values)) for step in steps]


def _answer(points, lo, hi, max_points):
    """What the server computes: rollups at ingestion, then plan + assemble."""
    stored = downsample.rollups(("k", s, v) for s, v in points)
    plan = downsample.plan(lo, hi, max_points)
    aggs = []
    for level, first, last in plan.blocks:
        aggs += [agg for (key, lvl, bucket), agg in stored.items() if lvl == level and first <= bucket <= last]
    for raw_lo, raw_hi in plan.raw:
        aggs += [downsample.point_agg(s, v) for s, v in points if raw_lo <= s <= raw_hi]
    return plan, downsample.assemble(plan, aggs)


@settings(max_examples=300, deadline=None)
@given(series(), st.integers(min_value=8, max_value=200), st.data())
def test_every_bucket_keeps_first_last_min_max(points, max_points, data):
    steps = sorted(s for s, _ in points)
    lo = data.draw(st.integers(min_value=0, max_value=steps[-1]))
    hi = data.draw(st.integers(min_value=lo, max_value=steps[-1] + 10))
    plan, buckets = _answer(points, lo, hi, max_points)
    inside = [(s, v) for s, v in points if lo <= s <= hi]
    assert sum(b["count"] for b in buckets) == len(inside)
    assert len(downsample.bucket_points(buckets)) <= max_points
    for bucket in buckets:
        mine = [(s, v) for s, v in inside if bucket["start"] <= s <= bucket["end"]]
        assert mine and bucket["count"] == len(mine)
        assert bucket["min"][1] == min(v for _, v in mine)
        assert bucket["max"][1] == max(v for _, v in mine)
        assert bucket["first"][0] == min(s for s, _ in mine)
        assert bucket["last"][0] == max(s for s, _ in mine)
        assert (bucket["min"][0], bucket["min"][1]) in mine and (bucket["max"][0], bucket["max"][1]) in mine
    # Every raw extreme survives: the global min and max of the range are among the points.
    if inside:
        drawn = {v for _, v in downsample.bucket_points(buckets)}
        assert min(v for _, v in inside) in drawn and max(v for _, v in inside) in drawn


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=10**7),
       st.integers(min_value=8, max_value=5000))
def test_plan_reads_few_rows_and_never_straddles(lo, span, max_points):
    hi = lo + span
    plan = downsample.plan(lo, hi, max_points)
    covered = 0
    for level, first, last in plan.blocks:
        width = 16**level
        assert plan.width % width == 0
        assert first * width >= lo and (last + 1) * width - 1 <= hi
        covered += (last - first + 1) * width
    blocks = sum(last - first + 1 for _, first, last in plan.blocks)
    assert blocks <= 16 * max_points + 200
    raw = sum(b - a + 1 for a, b in plan.raw)
    finest = 16 ** ROLLUP_LEVELS[0]
    if plan.level == 0:  # short ranges are read raw: less than one finest block per output bucket
        assert raw == span + 1 and raw <= finest * max_points // 4
    else:  # two edges, each shorter than one finest block
        assert raw <= 2 * (finest - 1)
    assert covered + raw == span + 1
    assert hi // plan.width - lo // plan.width + 1 <= max(2, max_points // 4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=5000), values), min_size=1, max_size=300),
       st.integers(min_value=1, max_value=700))
def test_raw_aggregates_equal_merging_the_points_one_by_one(points, width):
    points.sort(key=lambda p: p[0])  # by step; equal steps keep their order, as stored
    expected: dict = {}
    for step, value in points:
        expected[step // width] = downsample.merge(expected.get(step // width), downsample.point_agg(step, value))
    got = downsample.raw_aggregates(np.array([p[0] for p in points], dtype=np.int64),
                                    np.array([p[1] for p in points]), width)
    assert got == [expected[k] for k in sorted(expected)]


@settings(max_examples=200, deadline=None)
@given(series())
def test_rollups_equal_merging_the_points_one_by_one(points):
    expected: dict = {}
    for step, value in sorted(points, key=lambda p: p[0]):
        for level in ROLLUP_LEVELS:
            slot = ("k", level, step // 16**level)
            expected[slot] = downsample.merge(expected.get(slot), downsample.point_agg(step, value))
    assert downsample.rollups(("k", s, v) for s, v in points) == expected
