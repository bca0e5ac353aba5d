"""Ordering and fair share: the order in which a cycle considers pending work (within nominal
before borrowing, bounded wait, priority, dominant share, submit time; requeued victims after
their preemptor)."""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from operator import attrgetter

from .snapshot import PendingWorkload, PolicyOptions
from .state import CycleState


class Ordering:
    """The order of one cycle's pending work, over the cycle's state (`CycleState`), by the rules of
    `options` (`starving_below_nominal`, `slowdown_order`, `requeued_bound`, `starvation_seconds`).
    `starving` is the bounded-wait test the preemption part is given too."""

    def __init__(self, state: CycleState, options: PolicyOptions):
        self.state = state
        self.options = options
        self.snap = state.snap
        self.now = state.now
        self._shares: dict[tuple[str, str], tuple[int, float]] = {}
        self._queue_quota: dict[tuple[str, str], tuple] = {}  # per (pool, project) queue

    # Ordering. Work that fits in its project's nominal comes before work that would borrow (as
    # in Kueue: nominal is guaranteed, so a reclaim is not undone by a borrower taking the freed
    # resources back); then priority, then fair share, then submit time. Within a project, a
    # higher priority always goes first. Dynamic: shares change as the cycle admits.
    #
    # A workload requeued after a preemption is not considered before its preemptor while that
    # one is pending: otherwise a borrower could take back the very resources it was preempted
    # to free (ordered first because its project's head differs), and the preemptor would
    # preempt again, and again (preemption ping-pong). Its project's queue waits meanwhile.
    def order(self) -> Iterable[PendingWorkload]:
        queues: dict[tuple[str, str], list[PendingWorkload]] = {}
        for w in self.snap.pending:
            queue = queues.get((w.pool, w.project))
            if queue is None:
                queues[(w.pool, w.project)] = [w]
            else:
                queue.append(w)
        pending = {w.id for w in self.snap.pending}
        decided: set[int] = set()
        held: dict[int, list[tuple[str, str]]] = {}  # preemptor id -> queues waiting for it
        # Per queue, what its entries read: the cohort and the project's quota (None: no quota).
        cohorts = self.state.cohorts
        self._queue_quota = {key: (cohort, cohort.quotas.get(key[1])) if (cohort := cohorts.get(key[0])) is not None
                             else (None, None) for key in queues}
        entry = self._entry
        heap = []
        for key, items in queues.items():
            items.sort(key=_QUEUE_ORDER, reverse=True)
            heap.append(entry(key, items[-1]))
        heapq.heapify(heap)
        heappop, heappush, heappushpop = heapq.heappop, heapq.heappush, heapq.heappushpop
        # The entry of the queue just served, not pushed yet: heappushpop gives it straight back when
        # it still comes first (the same order as pushing it and popping the first).
        after = None
        while heap or held or after is not None:
            if after is not None:
                key = heappushpop(heap, after)[-1]
                after = None
            elif not heap:  # only holds left (preemptors waiting on each other): release them all
                for keys in held.values():
                    heap.extend(entry(k, queues[k][-1]) for k in keys)
                held.clear()
                pending = set()
                heapq.heapify(heap)
                continue
            else:
                key = heappop(heap)[-1]
            items = queues[key]
            by = items[-1].preempted_by
            if by is not None and by in pending and by not in decided and by != items[-1].id:
                held.setdefault(by, []).append(key)
                continue
            w = items.pop()
            yield w
            decided.add(w.id)
            if held:
                for k in held.pop(w.id, ()):
                    heappush(heap, entry(k, queues[k][-1]))
            if items:
                after = entry(key, items[-1])

    def _entry(self, key, w: PendingWorkload):
        # Called once per workload, as it comes to the head of its queue: worked out here, not memoised.
        cohort, q = self._queue_quota[key]
        options = self.options
        fresh = not options.starvation_seconds or not self.starving(w)
        if q is None:
            return (True, fresh, w.priority, math.inf, w.submitted_at, w.id, key)
        share = self._shares.get(key)
        if share is None or share[0] != q.version:  # recomputed only when the project's usage changed
            share = self._shares[key] = (q.version, q.share())
        used, nominal = q.used, q.nominal
        r, n = w.per_replica, w.replicas
        borrows = (used[0] + r.gpu_milli * n > nominal[0] or used[1] + r.cpu_milli * n > nominal[1]
                   or used[2] + r.memory_mb * n > nominal[2])
        if borrows and not fresh and options.starving_below_nominal and used[0] < nominal[0]:
            borrows = False
        if not fresh and options.slowdown_order and self.snap.project_service is not None:
            ratio = self._ratio(w.pool, w.project)
            return (borrows, fresh, ratio, w.priority, share[1], w.submitted_at, w.id, key)
        return (borrows, fresh, w.priority, share[1], w.submitted_at, w.id, key)

    def _ratio(self, pool: str, project: str) -> float:
        """The project's service ratio in the pool (1.0: no time in the system recorded, fully served)."""
        used, spent = self.snap.project_service.get((pool, project), (0.0, 0.0))
        return used / spent if spent > 0 else 1.0

    def starving(self, w: PendingWorkload) -> bool:
        """Waited past the bounded wait (PolicyOptions.starvation_seconds) since its submission. A requeued
        victim counts from its submission too: its time in the system began then, as its project's
        service ratio counts it (it gains the order, not the reclaim right: preemption.py)."""
        limit = self.options.starvation_seconds
        if not limit or self.now is None or w.submitted_at is None:
            return False
        if w.preempted_by is not None and not self.options.requeued_bound:
            return False
        return (self.now - w.submitted_at).total_seconds() >= limit


# Within a queue (one project on one pool): the highest priority first, then the earliest submitted.
_QUEUE_ORDER = attrgetter("priority", "submitted_at", "id")
