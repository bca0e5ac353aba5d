"""The reconciler's work queue: the keys (workload ids, node names) whose objects changed since
the last pass, and keys to look at again later (a grace period, a backoff, a health check).

A key added many times before a pass is taken once (a set), as client-go's workqueue does. The
informers add keys from their watch threads; the reconciler's loop takes them all at once.
"""
from __future__ import annotations

import heapq
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Batch:
    workloads: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.workloads or self.nodes)


class WorkQueue:
    def __init__(self, wakeup: threading.Event | None = None):
        self.wakeup = wakeup or threading.Event()
        self._lock = threading.Lock()
        self._workloads: set[int] = set()
        self._nodes: set[str] = set()
        self._later: list[tuple[float, str, object]] = []  # heap of (due, "workload" | "node", key)
        self._due: dict[tuple[str, object], float] = {}  # the earliest due time of each delayed key
        self.added = 0  # keys added so far (for the tests and the benchmark)

    def add_workload(self, workload_id: int) -> None:
        with self._lock:
            self._workloads.add(workload_id)
            self.added += 1
        self.wakeup.set()

    def add_node(self, name: str) -> None:
        with self._lock:
            self._nodes.add(name)
            self.added += 1
        self.wakeup.set()

    def add_after(self, kind: str, key, seconds: float) -> None:
        """Queue `key` again in `seconds` (once due, with the next pass). A key already waiting
        to come back earlier keeps its time: that pass can ask again."""
        due = time.monotonic() + max(0.0, seconds)
        with self._lock:
            if self._due.get((kind, key), float("inf")) <= due:
                return
            self._due[(kind, key)] = due
            heapq.heappush(self._later, (due, kind, key))

    def next_due(self) -> float | None:
        """Seconds until the earliest delayed key is due (None: nothing delayed)."""
        with self._lock:
            while self._later and self._due.get(self._later[0][1:]) != self._later[0][0]:
                heapq.heappop(self._later)
            return max(0.0, self._later[0][0] - time.monotonic()) if self._later else None

    def take(self) -> Batch:
        """Every key queued so far and every delayed key now due; the queue is left empty of them."""
        now = time.monotonic()
        with self._lock:
            batch = Batch(self._workloads, self._nodes)
            self._workloads, self._nodes = set(), set()
            while self._later and self._later[0][0] <= now:
                due, kind, key = heapq.heappop(self._later)
                if self._due.get((kind, key)) != due:
                    continue  # superseded by an earlier time, already taken
                del self._due[(kind, key)]
                (batch.workloads if kind == "workload" else batch.nodes).add(key)
        return batch

    def pending(self) -> int:
        with self._lock:
            return len(self._workloads) + len(self._nodes)
