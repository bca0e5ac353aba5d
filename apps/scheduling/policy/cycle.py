"""The cycle: `schedule(snapshot, options)`, the package's entry point. One pass over the pending
work in order, a decision for each (constraint, budget, quota, placement, preemption, reservation),
queue positions for those that wait.

`Cycle` composes the parts: the working state (`CycleState`, state.py) and the ordering, preemption,
backfill and reasons parts, each given that state and the options, and the preemption part the
ordering's bounded-wait test. No part inherits from another; each reads the settings it needs from
`PolicyOptions`."""
from __future__ import annotations

from .backfill import Backfill
from .cluster import ClusterState
from .locality import hold_until
from .ordering import Ordering
from .placement import allowed_models, placement_entries
from .preemption import Preemption
from .reasons import Reasons
from .snapshot import Admit, Decision, PendingWorkload, PolicyOptions, Preempt, Snapshot, Wait, WaitKind
from .state import CycleState

_BARE = PolicyOptions()


class Cycle:
    """One scheduling cycle over `snapshot`, decided by `options` (`PolicyOptions()`: the bare policy).
    `cluster`: the free capacity kept from the previous cycle (cluster.py)."""

    def __init__(self, snapshot: Snapshot, options: PolicyOptions | None = None, *,
                 cluster: ClusterState | None = None):
        options = _BARE if options is None else options
        self.options = options
        self.state = state = CycleState(snapshot, options, cluster)
        self.ordering = Ordering(state, options)
        self.preemption = Preemption(state, options, starving=self.ordering.starving)
        self.backfill = Backfill(state, options)
        self.reasons = Reasons(state, options)

    def run(self) -> list[Decision]:
        decisions: list[Decision] = []
        positions: dict[str, int] = {}
        memo: dict[tuple, tuple[tuple, str, str]] = {}
        class_key, version = self.reasons.class_key, self.reasons.version
        for w in self.ordering.order():
            key = class_key(w)
            state = version(w.pool)
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
                if key is not None and not preempts and eta is None and version(w.pool) == state:
                    memo[key] = (state, reason, kind)
            positions[w.pool] = position = positions.get(w.pool, 0) + 1
            decisions.append(Wait(w.id, reason, eta, position, kind))
        return decisions

    def _decide(self, w: PendingWorkload) -> tuple[Admit | Wait, list[Preempt]]:
        st, options, reasons = self.state, self.options, self.reasons
        cohort = st.cohorts[w.pool]
        pool = st.pools[w.pool]
        shape = w.per_replica.as_tuple()
        n = w.replicas
        need = (shape[0] * n, shape[1] * n, shape[2] * n)
        models = allowed_models(w)
        if models is not None and not (models & pool.models):
            return Wait(w.id, f"constraint: pool '{w.pool}' has no schedulable node with GPU model "
                              f"{' or '.join(sorted(models))}", kind=WaitKind.CONSTRAINT), []
        never = reasons.never_fits(w, shape, models)
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
            done = st.try_place(pool, shape, w.replicas, models)
            pool.holders = frozenset()
            if done is not None:
                cohort.add(w.project, need)
                cohort.charge_budget(w.project, w, need[0])
                return Admit(w.id, placement_entries(done)), []
        awaiting = st.awaiting.get(w.id)
        if awaiting is not None:
            self.preemption.keep_claim(w, cohort, pool, shape, need, models)
            ids = ", ".join(str(i) for i in sorted(awaiting))
            eta = max((r.expected_end for i in awaiting if (r := st.running.get(i)) is not None
                       and r.expected_end is not None), default=None)
            return Wait(w.id, f"preempting: waiting for {len(awaiting)} preempted workload(s) ({ids}) "
                              f"to exit", eta, kind=WaitKind.PREEMPTING), []
        if options.preemption:
            found = self.preemption.preempt(w, cohort, pool, shape, need, models)
            if found is not None:
                return found
        if quota is None and options.reservations and w.pool not in st.reserved_pools:
            reserved = self.backfill.reserve(w, pool, shape, models)
            if reserved is not None:
                return reserved, []
        if quota is not None:
            return Wait(w.id, quota.reason, kind=quota.kind), []
        return Wait(w.id, reasons.capacity_reason(w, pool, models, shape), kind=WaitKind.CAPACITY), []


    def _hold_for_data(self, w: PendingWorkload, cohort, pool, shape, need, models) -> Admit | Wait | None:
        """Delay scheduling (locality.py): w placed on the nodes of its pool holding its datasets, or
        held back for them (a LOCALITY wait) while it fits elsewhere; None when it is not held (no
        bound, bound passed, no holder that could ever take it, or it fits nowhere now)."""
        st = self.state
        until = hold_until(w, self.options.locality_wait, st.now)
        if until is None or w.id in st.awaiting or (w.replicas > 1 and pool.levels):
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
            return Admit(w.id, placement_entries(done))
        if (pool.name, shape, w.replicas, models) in st.failed or not pool.fits(shape, w.replicas, models):
            return None
        return Wait(w.id, self.reasons.locality_reason(w, holders, until), until, kind=WaitKind.LOCALITY)


def schedule(snapshot: Snapshot, options: PolicyOptions | None = None, *,
             cluster: ClusterState | None = None) -> list[Decision]:
    """One scheduling cycle: a decision for every pending workload, plus preemptions.

    `options`: how to decide (settings, rule switches, tuning constants); None: `PolicyOptions()`.
    `cluster`: the free capacity kept from the previous cycle (cluster.py), brought up to date from
    this snapshot instead of rebuilt; the decisions are the same with it or without."""
    return Cycle(snapshot, options, cluster=cluster).run()
