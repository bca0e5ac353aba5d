"""Data-aware placement: among placements that are otherwise equal, prefer nodes whose dataset
cache already holds the workload's datasets (no fill before it starts).

A tie-break, nothing more. The placement's own choice (best-fit candidates, then the least added
fragmentation and CPU left over) is made first; locality only swaps it for a node holding the
datasets whose free GPUs, CPU, memory, GPU model and topology domains are the same, so the
cluster after the placement is the same up to node names. It never changes whether a workload
fits, where quota, priority or the order of the queue stand, or which workloads are preempted
(tests/scheduling/test_locality.py checks it over random clusters).

`PendingWorkload.datasets_on` names the nodes holding every dataset version the workload mounts
(the service reads them from the node caches); empty for workloads without datasets, for which
nothing changes. Pure: no I/O.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
