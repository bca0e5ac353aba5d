"""Pending reasons: why a workload waits on capacity (and whether the GPU-node reserve is why),
and the memoised waits that give the next workload of the same class the same reason while
nothing changed. (Estimated starts come with the decisions that know them: reservations in
backfill.py, preemptions in preemption.py and cycle.py; queue positions in cycle.py.)"""
from __future__ import annotations

from .locality import hold_until
from .placement import Pool
from .snapshot import PendingWorkload, PolicyOptions, fmt_shape, largest_node_refusal
from .state import CycleState


class Reasons:
    """Why work waits, over the cycle's state, and the memo of waits (`options.memo_waits`)."""

    def __init__(self, state: CycleState, options: PolicyOptions):
        self.state = state
        self.options = options
        self.snap = state.snap
        self.now = state.now
        self._sizes: dict[str, list[tuple]] | None = None  # per pool, every node's (name, model, allocatable)
        self._kinds: dict[str, dict[str, set[tuple]]] = {}  # per pool and GPU model, the distinct allocatable sizes
        self._refusals: dict[tuple, str] = {}  # per (pool, allowed models, shape), the never-fits reason

    # Memoised waits. A decision that changed nothing (a Wait with no preemption, claim or
    # reservation) is a pure function of the workload's class and of the pool's state; until that
    # state changes, the next workload of the same class gets the same reason without the work
    # (a long queue is mostly the same few shapes per project waiting for the same thing).
    def class_key(self, w: PendingWorkload) -> tuple | None:
        state = self.state
        if w.id in state.awaiting or not self.options.memo_waits:
            return None
        wait = self.options.locality_wait
        if w.datasets_on and wait and hold_until(w, wait, self.now):
            return None  # its decision depends on where its data is (delay scheduling): never memoised
        cohorts = state.cohorts
        q = cohorts[w.pool].quotas.get(w.project) if w.pool in cohorts else None
        budget = w.expected_seconds if q is not None and q.hours_left is not None else None
        return (w.pool, w.project, w.priority, w.per_replica, w.replicas, w.gpu_model, budget)

    def version(self, pool: str) -> tuple:
        """What a memoised wait of the pool is valid for: it holds while this stays the same."""
        state = self.state
        return (state.cohorts[pool].version, state.pools[pool].changes, len(state.reserved_pools), len(state.victims))

    def never_fits(self, w: PendingWorkload, shape, models) -> str:
        """Why no node of w's pool, schedulable or not (a cordon or a fault passes, a node's size
        does not), can ever hold one replica of w: its pool shrank (nodes removed, capacity lowered)
        after submission, which refuses such work. It waits (nodes may come back) saying so."""
        if self._sizes is None:
            self._sizes, self._kinds, self._refusals = {}, {}, {}
            for n in self.snap.nodes:
                size = n.allocatable.as_tuple()
                self._sizes.setdefault(n.pool, []).append((n.name, n.gpu_model, *size))
                self._kinds.setdefault(n.pool, {}).setdefault(n.gpu_model, set()).add(size)
        # Whether some node of an allowed model is as large as the ask, from the pool's distinct node
        # sizes per model (a few, where the nodes are thousands); the reason, rarely needed, from the nodes.
        key = (w.pool, models, shape)
        known = self._refusals.get(key)
        if known is not None:
            return known
        kinds = self._kinds.get(w.pool)
        if not kinds:
            return ""
        if any(all(have >= want for have, want in zip(size, shape, strict=True))
               for model, sizes in kinds.items() if models is None or model in models for size in sizes):
            self._refusals[key] = ""
            return ""
        if key not in self._refusals:
            nodes = [(name, *size) for name, model, *size in self._sizes.get(w.pool, ())
                     if models is None or model in models]
            refusal = largest_node_refusal(pool_name=w.pool, nodes=nodes, ask=shape) if nodes else ""
            self._refusals[key] = f"never: {refusal}; it waits in case nodes are added, or stop it" if refusal else ""
        return self._refusals[key]

    def locality_reason(self, w: PendingWorkload, holders, until) -> str:
        """Why a workload that fits now waits (delay scheduling): for a node holding its data."""
        names = sorted(n.name for n in holders)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return (f"locality: waiting for a node holding its data ({shown} of pool '{w.pool}' cache its datasets); "
                f"it would fit elsewhere now, and takes any node that fits from {until.isoformat(timespec='seconds')} "
                "at the latest")

    def capacity_reason(self, w, pool: Pool, models, shape) -> str:
        count, most = pool.free_summary(models)
        where = f" with GPU model {' or '.join(sorted(models))}" if models else ""
        reason = (f"capacity: pool '{w.pool}' cannot fit {w.replicas} replica(s) of {fmt_shape(shape)} at once"
                  f"{where}; the most free on one node is {fmt_shape(most)}")
        if shape[0] == 0 and pool.reserve and self._fits_without_reserve(w, pool, shape, models):
            reason += (f" (GPU nodes keep {pool.reserve:.0%} of their free GPUs' share of CPU and memory for GPU "
                       "work, which work without a GPU may not take)")
        return reason

    def _fits_without_reserve(self, w, pool: Pool, shape, models) -> bool:
        """Whether CPU-only w would fit now if GPU nodes kept nothing for their free GPUs (a trial:
        it leaves the pool as it was)."""
        kept = pool.reserve
        pool.reserve = 0.0
        try:
            return pool.fits(shape, w.replicas, models)
        finally:
            pool.reserve = kept
