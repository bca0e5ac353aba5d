"""Datasets in `manage.py simulate`: which dataset each replayed job reads, and the node caches.

The trace has no datasets, so they are an assumption, stated with every figure: `datasets`
datasets of `dataset_gb` each, a job reads one, chosen with Zipf popularity (weight 1/rank^zipf,
seeded), every node has an LRU cache of `cache_gb`. A job start on a node is a hit when the
node's cache holds the job's dataset, else a miss that fills it (evicting the least recently
used). With `locality`, pending jobs tell the policy which nodes hold their dataset
(PendingWorkload.datasets_on), as the service does from real node caches.
"""
from __future__ import annotations

import random
from collections import OrderedDict


class DatasetCacheModel:
    def __init__(self, job_ids, *, datasets: int, dataset_gb: float, cache_gb: float, zipf: float = 1.1,
                 seed: int = 0, locality: bool = True):
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

    def holders(self, job_id: int) -> frozenset[str]:
        if not self.locality:
            return frozenset()
        return frozenset(self.holding.get(self.dataset_of[job_id], ()))

    def started(self, job_id: int, placement) -> None:
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
