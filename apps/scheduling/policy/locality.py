"""Data-aware placement: among placements that are otherwise equal, prefer nodes whose dataset
cache already holds the workload's datasets (no fill before it starts); and, where the pool allows
it, delay scheduling: wait a bounded time for such a node.

The tie-break first. The placement's own choice (best-fit candidates, then the least added
fragmentation and CPU left over) is made first; locality only swaps it for a node holding the
datasets whose free GPUs, CPU, memory, GPU model and topology domains are the same, so the
cluster after the placement is the same up to node names. It never changes whether a workload
fits, where quota, priority or the order of the queue stand, or which workloads are preempted
(tests/scheduling/test_locality.py checks it over random clusters).

`PendingWorkload.datasets_on` names the nodes holding every dataset version the workload mounts
(the service reads them from the node caches); empty for workloads without datasets, for which
nothing changes.

Delay scheduling (the idea of Zaharia et al., EuroSys'10: a job that cannot start where its data is
waits a little, since such a place soon frees up, rather than start elsewhere at once). With a
bound for the pool (`Snapshot.locality_wait`, seconds; the pool's `locality_wait_seconds` in the
service), a workload whose datasets some schedulable node of its pool caches, and that could run on
such a node were it empty, is placed on those nodes only; if none of them has room now but another
node has, it waits (a Wait of kind LOCALITY) instead of starting there. The bound counts from the
first cycle that held it back (`PendingWorkload.locality_since`, which the service and the simulator
keep), so it is the most a workload ever waits for its data: once the bound has passed it is placed
as any other, holders preferred only as the tie-break. A workload that fits nowhere now waits on
capacity as before (waiting for data would not start it sooner); gangs on pools with topology
domains keep the tie-break only (their domains come first). Bound 0 or absent: nothing changes.
Pure: no I/O.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from .snapshot import PendingWorkload


def rank(node_name: str, holders: frozenset[str]) -> int:
    """0 for a node holding the datasets, 1 otherwise."""
    return 0 if node_name in holders else 1


def holder_first(candidates: Sequence[tuple[Any, Any]], holders: frozenset[str], equal) -> list[tuple[Any, Any]]:
    """The (node, GPUs) candidates, the first holder that is `equal(first, holder)` to the first
    candidate (the placement's choice) moved to the front. Others keep their order."""
    items = list(candidates)
    if not holders or not items or items[0][0].name in holders:
        return items
    first = items[0][0]
    for i, (node, _gpus) in enumerate(items[1:], start=1):
        if node.name in holders and equal(first, node):
            return [items[i], *items[:i], *items[i + 1:]]
    return items


def fill_seconds(total_bytes: int, bandwidth_bytes_per_second: float) -> float:
    """How long filling a node's cache with `total_bytes` is expected to take."""
    if total_bytes <= 0 or bandwidth_bytes_per_second <= 0:
        return 0.0
    return total_bytes / bandwidth_bytes_per_second


def hold_until(w: PendingWorkload, wait: dict[str, float] | None, now: datetime | None) -> datetime | None:
    """Until when w may still wait for a node holding its datasets (delay scheduling), or None when it
    may not (no datasets cached, no bound for its pool, no clock, or its bound has passed)."""
    if not w.datasets_on or not wait or now is None:
        return None
    bound = wait.get(w.pool) or 0.0
    if not bound > 0:
        return None
    since = w.locality_since if w.locality_since is not None and w.locality_since <= now else now
    until = since + timedelta(seconds=bound)
    return until if now < until else None
