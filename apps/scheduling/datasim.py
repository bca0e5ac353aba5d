"""Datasets in `manage.py simulate`: which dataset each replayed job reads, and the node caches.

The trace has no datasets, so they are an assumption, stated with every figure: `datasets`
datasets of `dataset_gb` each, a job reads one, chosen with Zipf popularity (weight 1/rank^zipf,
seeded), every node has an LRU cache of `cache_gb`. A job start on a node is a hit when the
node's cache holds the job's dataset, else a miss that fills it (evicting the least recently
used). With `locality`, pending jobs tell the policy which nodes hold their dataset
(PendingWorkload.datasets_on), as the service does from real node caches; with `wait_seconds`,
the pool's delay-scheduling bound (Snapshot.locality_wait), the model keeps when each job was first
held back for its data (PendingWorkload.locality_since) and how long it was held in all.
"""
from __future__ import annotations

import math
import random
from collections import OrderedDict
from datetime import datetime, timedelta


class DatasetCacheModel:
    def __init__(self, job_ids, *, datasets: int, dataset_gb: float, cache_gb: float, zipf: float = 1.1,
                 seed: int = 0, locality: bool = True, wait_seconds: float = 0.0):
        if datasets < 1 or dataset_gb <= 0 or cache_gb < 0:
            raise ValueError("datasets >= 1, dataset_gb > 0 and cache_gb >= 0")
        rng = random.Random(seed)
        weights = [1.0 / (rank ** zipf) for rank in range(1, datasets + 1)]
        ids = sorted(job_ids)
        self.dataset_of = dict(zip(ids, rng.choices(range(datasets), weights=weights, k=len(ids)), strict=True))
        self.slots = int(cache_gb // dataset_gb)
        self.dataset_gb = dataset_gb
        self.locality = locality
        self.caches: dict[str, OrderedDict[int, None]] = {}
        self.holding: dict[int, set[str]] = {}
        self.hits = self.misses = 0
        self.wait_seconds = wait_seconds if locality else 0.0
        self.since: dict[int, float] = {}  # job id -> simulated time it was first held back for its data
        self.held: dict[int, float] = {}  # job id -> seconds it was held back (until it started or waited on another thing)

    def holders(self, job_id: int) -> frozenset[str]:
        if not self.locality:
            return frozenset()
        return frozenset(self.holding.get(self.dataset_of[job_id], ()))

    def locality_wait(self, pool: str) -> dict[str, float] | None:
        """PolicyOptions.locality_wait for the pool (None: delay scheduling off)."""
        return {pool: self.wait_seconds} if self.wait_seconds > 0 else None

    def locality_since(self, job_id: int, epoch: datetime) -> datetime | None:
        t = self.since.get(job_id)
        return None if t is None else epoch + timedelta(seconds=t)

    def waiting(self, job_id: int, held_for_data: bool, t: float) -> None:
        """A cycle at simulated time t made the job wait: held back for its data (a LOCALITY wait), or
        on something else (its hold, if it had one, ended then)."""
        if held_for_data:
            self.since.setdefault(job_id, t)
        elif job_id in self.since and job_id not in self.held:
            self.held[job_id] = t - self.since[job_id]

    def next_release(self, t: float) -> float | None:
        """When the next hold ends after t (a cycle is due then, so no job waits past its bound)."""
        ends = [since + self.wait_seconds for job_id, since in self.since.items()
                if job_id not in self.held and since + self.wait_seconds > t]
        # a millisecond past the end: the cycle then sees the bound as passed, whatever the rounding
        return min(ends) + 1e-3 if ends else None

    def started(self, job_id: int, placement, t: float = math.nan) -> None:
        if job_id in self.since and job_id not in self.held:
            self.held[job_id] = t - self.since[job_id]
        dataset = self.dataset_of[job_id]
        for node in sorted({p["node"] for p in placement}):
            cache = self.caches.setdefault(node, OrderedDict())
            if dataset in cache:
                self.hits += 1
                cache.move_to_end(dataset)
                continue
            self.misses += 1
            if self.slots == 0:
                continue
            cache[dataset] = None
            self.holding.setdefault(dataset, set()).add(node)
            while len(cache) > self.slots:
                evicted, _ = cache.popitem(last=False)
                self.holding[evicted].discard(node)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    @property
    def filled_gb(self) -> float:
        return self.misses * self.dataset_gb
