"""Backfill and reservations: the first capacity-blocked workload of a pool gets the resources it
will have as running work ends (with the estimated start), and smaller work fills around it."""
from __future__ import annotations

import math
from datetime import datetime

from .placement import Pool
from .snapshot import PolicyOptions, RunningWorkload, Wait, WaitKind, fmt_shape
from .state import CycleState, usage


class Backfill:
    """Reservations over the cycle's state, by the rules of `options` (`youngest_first`)."""

    def __init__(self, state: CycleState, options: PolicyOptions):
        self.state = state
        self.youngest_first = options.youngest_first

    def _age_key(self, r) -> float:
        if not self.youngest_first:
            return 0.0
        return -r.admitted_at.timestamp() if r.admitted_at is not None else math.inf

    def reserve(self, w, pool: Pool, shape, models) -> Wait | None:
        """Hold, for the first capacity-blocked workload of the pool, the resources it will get
        when running workloads end (earliest expected end first); smaller work backfills around."""
        state = self.state
        cohort = state.cohorts[w.pool]
        need = tuple(x * w.replicas for x in shape)
        pending_release = sorted(
            (r for r in state.running.values() if r.pool == w.pool and r.id not in state.victims),
            key=lambda r: (r.expected_end is None, r.expected_end or datetime.max, self._age_key(r), r.id),
        )
        released: list[RunningWorkload] = []
        found = False
        step = 1
        i = 0
        while i < len(pending_release):
            batch = pending_release[i:i + step]
            i += len(batch)
            for r in batch:
                state.release_running(r)
            released.extend(batch)
            if pool.fits(shape, w.replicas, models):
                found = True
                break
            step = min(step * 2, 64)
        for r in reversed(released):
            state.release_running(r, sign=1)
        if not found:
            return None
        # Shrink the last batch to the exact workload whose end makes it fit.
        while len(released) > 1:
            last = released.pop()
            for r in released:
                state.release_running(r)
            fits = pool.fits(shape, w.replicas, models)
            for r in reversed(released):
                state.release_running(r, sign=1)
            if not fits:
                released.append(last)
                break
        if not state.plan_and_hold(w, pool, shape, models, released):
            return None
        state.reserved_pools.add(w.pool)
        cohort.claim(w.project, need, freed=[(r.project, usage(r)) for r in released])
        ends = [r.expected_end for r in released]
        eta = max(ends) if ends and all(e is not None for e in ends) else None
        when = f" (expected at {eta.isoformat(timespec='seconds')})" if eta else ""
        return Wait(w.id, f"reserved: pool '{w.pool}' is full for {w.replicas} replica(s) of {fmt_shape(shape)}; "
                          f"capacity is reserved for it as {len(released)} running workload(s) end{when}, "
                          f"and smaller work backfills around it", eta, kind=WaitKind.RESERVED)
