"""The cycle: `schedule(snapshot)`, the package's entry point. One pass over the pending work in
order, a decision for each (constraint, budget, quota, placement, preemption, reservation),
queue positions for those that wait."""
from __future__ import annotations

from .backfill import _Backfill
from .cluster import ClusterState
from .locality import hold_until
from .ordering import _Ordering
from .placement import _models, _placement
from .preemption import _Preemption
from .reasons import _Reasons
from .snapshot import Admit, Decision, PendingWorkload, Preempt, Snapshot, Wait, WaitKind


class _Cycle(_Ordering, _Preemption, _Backfill, _Reasons):
    def run(self) -> list[Decision]:
        decisions: list[Decision] = []
        positions: dict[str, int] = {}
        memo: dict[tuple, tuple[tuple, str, str]] = {}
        for w in self._order():
            key = self._class_key(w)
            state = self._state(w.pool)
            hit = memo.get(key) if key is not None else None
            if hit is not None and hit[0] == state:
                reason, eta, kind = hit[1], None, hit[2]
            else:
                decision, preempts = self._decide(w)
                decisions.extend(preempts)
                if isinstance(decision, Admit):
                    decisions.append(decision)
                    continue
                reason, eta, kind = decision.reason, decision.estimated_start, decision.kind
                if key is not None and not preempts and eta is None and self._state(w.pool) == state:
                    memo[key] = (state, reason, kind)
            positions[w.pool] = position = positions.get(w.pool, 0) + 1
            decisions.append(Wait(w.id, reason, eta, position, kind))
        return decisions

    def _decide(self, w: PendingWorkload) -> tuple[Admit | Wait, list[Preempt]]:
        cohort = self.cohorts[w.pool]
        pool = self.pools[w.pool]
        shape = w.per_replica.as_tuple()
        n = w.replicas
        need = (shape[0] * n, shape[1] * n, shape[2] * n)
        models = _models(w)
        if models is not None and not (models & pool.models):
            return Wait(w.id, f"constraint: pool '{w.pool}' has no schedulable node with GPU model "
                              f"{' or '.join(sorted(models))}", kind=WaitKind.CONSTRAINT), []
        never = self._never_fits(w, shape, models)
        if never:  # before quota and budget: no quota or budget would let it start
            return Wait(w.id, never, kind=WaitKind.NEVER_FITS), []
        if not pool.nodes:
            return Wait(w.id, f"capacity: pool '{w.pool}' has no schedulable node", kind=WaitKind.CAPACITY), []
        budget = cohort.budget_check(w.project, w, need[0])
        if budget:
            return Wait(w.id, budget, kind=WaitKind.BUDGET), []
        quota = cohort.check(w.project, need)
        if quota is None:
            held = self._hold_for_data(w, cohort, pool, shape, need, models)
            if held is not None:
                return held, []
            pool.holders = w.datasets_on  # data-aware placement: a tie-break among equal nodes (locality.py)
            done = self._try_place(pool, shape, w.replicas, models)
            pool.holders = frozenset()
            if done is not None:
                cohort.add(w.project, need)
                cohort.charge_budget(w.project, w, need[0])
                return Admit(w.id, _placement(done)), []
        if w.id in self.awaiting:
            self._keep_claim(w, cohort, pool, shape, need, models)
            ids = ", ".join(str(i) for i in sorted(self.awaiting[w.id]))
            eta = max((r.expected_end for i in self.awaiting[w.id] if (r := self.running.get(i)) is not None
                       and r.expected_end is not None), default=None)
            return Wait(w.id, f"preempting: waiting for {len(self.awaiting[w.id])} preempted workload(s) ({ids}) "
                              f"to exit", eta, kind=WaitKind.PREEMPTING), []
        if self.snap.preemption:
            found = self._preempt(w, cohort, pool, shape, need, models)
            if found is not None:
                return found
        if quota is None and self.snap.reservations and w.pool not in self.reserved_pools:
            reserved = self._reserve(w, pool, shape, models)
            if reserved is not None:
                return reserved, []
        if quota is not None:
            return Wait(w.id, quota.reason, kind=quota.kind), []
        return Wait(w.id, self._capacity_reason(w, pool, models, shape), kind=WaitKind.CAPACITY), []


    def _hold_for_data(self, w: PendingWorkload, cohort, pool, shape, need, models) -> Admit | Wait | None:
        """Delay scheduling (locality.py): w placed on the nodes of its pool holding its datasets, or
        held back for them (a LOCALITY wait) while it fits elsewhere; None when it is not held (no
        bound, bound passed, no holder that could ever take it, or it fits nowhere now)."""
        until = hold_until(w, self.snap.locality_wait, self.now)
        if until is None or w.id in self.awaiting or (w.replicas > 1 and pool.levels):
            return None
        holders = [n for name in w.datasets_on if (n := pool.by_name.get(name)) is not None]
        if sum(pool.empty_capacity(n, shape, models) for n in holders) < w.replicas:
            return None
        pool.holders = w.datasets_on
        done = pool.place_only(shape, w.replicas, models, {n.idx for n in holders})
        pool.holders = frozenset()
        if done is not None:
            cohort.add(w.project, need)
            cohort.charge_budget(w.project, w, need[0])
            return Admit(w.id, _placement(done))
        if (pool.name, shape, w.replicas, models) in self.failed or not pool.fits(shape, w.replicas, models):
            return None
        return Wait(w.id, self._locality_reason(w, holders, until), until, kind=WaitKind.LOCALITY)


def schedule(snapshot: Snapshot, cluster: ClusterState | None = None) -> list[Decision]:
    """One scheduling cycle: a decision for every pending workload, plus preemptions.

    `cluster`: the free capacity kept from the previous cycle (cluster.py), brought up to date from
    this snapshot instead of rebuilt; the decisions are the same with it or without."""
    return _Cycle(snapshot, cluster).run()
