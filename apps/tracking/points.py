"""Packing and unpacking of metric chunks (MetricChunk). Pure: numpy over bytes, no ORM.

A chunk holds the points of one key from one batch, sorted by step (equal steps in arrival
order), as three little-endian columns: int64 steps, float64 values, float64 Unix times.
Points of a key are ordered by (step, chunk id, position in the chunk); `order` packs the last
two into one integer, which is also the tie-breaker of full-resolution paging (`after_id`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

STEPS = np.dtype("<i8")
FLOATS = np.dtype("<f8")
POSITION_BITS = 20  # up to ~1M points per chunk; ids stay below 2**53 for chunk ids below 2**33


@dataclass(frozen=True)
class Packed:
    first_step: int
    last_step: int
    count: int
    step_data: bytes
    value_data: bytes
    time_data: bytes


def pack(rows: list[tuple[int, float, float]]) -> Packed:
    """`rows` = [(step, value, time)] of one key, sorted by step."""
    steps = np.array([r[0] for r in rows], dtype=STEPS)
    values = np.array([r[1] for r in rows], dtype=FLOATS)
    times = np.array([r[2] for r in rows], dtype=FLOATS)
    return Packed(first_step=int(steps[0]), last_step=int(steps[-1]), count=len(rows), step_data=steps.tobytes(),
                  value_data=values.tobytes(), time_data=times.tobytes())


@dataclass
class Points:
    """Columns of points, in (step, order) order once `sorted()`."""

    steps: np.ndarray
    values: np.ndarray
    times: np.ndarray
    order: np.ndarray

    @classmethod
    def empty(cls) -> Points:
        return cls(np.empty(0, STEPS), np.empty(0, FLOATS), np.empty(0, FLOATS), np.empty(0, STEPS))

    def __len__(self) -> int:
        return len(self.steps)

    def take(self, index) -> Points:
        return Points(self.steps[index], self.values[index], self.times[index], self.order[index])

    def sorted(self) -> Points:
        return self.take(np.lexsort((self.order, self.steps)))

    def concat(self, other: Points) -> Points:
        if not len(self):
            return other
        if not len(other):
            return self
        return Points(np.concatenate((self.steps, other.steps)), np.concatenate((self.values, other.values)),
                      np.concatenate((self.times, other.times)), np.concatenate((self.order, other.order)))

    def pairs(self) -> list[list]:
        """[[step, value], ...] as plain Python numbers."""
        return [list(p) for p in zip(self.steps.tolist(), self.values.tolist(), strict=True)]


def decode(chunks: Iterable[tuple[int, bytes, bytes, bytes]], *, lo: int | None = None, hi: int | None = None,
           after: tuple[int, int] | None = None) -> Points:
    """The points of (chunk id, step_data, value_data, time_data) rows with lo <= step <= hi and
    (step, order) > `after`, sorted by (step, order)."""
    parts = []
    for chunk_id, step_data, value_data, time_data in chunks:
        steps = np.frombuffer(step_data, dtype=STEPS)
        order = (np.int64(chunk_id) << POSITION_BITS) + np.arange(len(steps), dtype=STEPS)
        parts.append(Points(steps, np.frombuffer(value_data, dtype=FLOATS), np.frombuffer(time_data, dtype=FLOATS),
                            order))
    if not parts:
        return Points.empty()
    points = parts[0] if len(parts) == 1 else Points(*(np.concatenate(column) for column in zip(
        *((p.steps, p.values, p.times, p.order) for p in parts), strict=True)))
    keep = np.ones(len(points), dtype=bool)
    if lo is not None:
        keep &= points.steps >= lo
    if hi is not None:
        keep &= points.steps <= hi
    if after is not None:
        keep &= (points.steps > after[0]) | ((points.steps == after[0]) & (points.order > after[1]))
    if not keep.all():
        points = points.take(keep)
    if len(parts) == 1:  # one chunk is sorted already
        return points
    return points.sorted()
