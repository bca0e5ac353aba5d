"""Preemption: victims for a pending workload (its own project's lower priorities, other
projects' borrowed work when it reclaims its nominal or takes lent quota), minimal victim sets,
anti-thrash protection, and the claim a preemptor keeps while its victims exit."""
from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import datetime, timedelta

from .placement import Pool, allowed_models
from .quota import Cohort
from .snapshot import PendingWorkload, PolicyOptions, Preempt, RunningWorkload, Wait, WaitKind
from .state import CycleState, usage


class Preemption:
    """Victim searches over the cycle's state, by the rules of `options` (`preemption`,
    `starving_reclaim`, `timeslice`, `timeslice_min_gpu`, `timeslice_seconds`,
    `repreempt_min_runtime_seconds`, `grace_seconds`, `scarce_swap`, `scarce_share`). `starving`: whether a pending workload is past
    the bounded wait (the ordering's test, `Ordering.starving`), which widens what it may reclaim."""

    def __init__(self, state: CycleState, options: PolicyOptions, starving: Callable[[PendingWorkload], bool]):
        self.state = state
        self.options = options
        self.starving = starving
        self.now = state.now
        self.failed: set[tuple] = set()  # victim searches that found nothing (they stay failed)
        self.reclaimable: dict[tuple[str, str], dict] = {}  # _reclaimable's, per (pool, project)
        self.own_entries: dict[tuple[str, str], list[tuple]] = {}  # _own's, per (pool, project)
        self.scarce: dict[tuple, tuple | None] = {}  # _scarce_info's, per (pool, models)
        # Victims taken so far this cycle, per (pool, project): the candidate lists below, filtered
        # of the victims already taken, hold until it changes (victim sets only grow in a cycle).
        self.taken: dict[tuple[str, str], int] = {}
        self.live: dict[tuple, tuple[int, list[tuple]]] = {}

    def preempt(self, w, cohort: Cohort, pool: Pool, shape, need, models):
        """Victims for w, held and claimed for it: (its Wait, the Preempts), or None."""
        options = self.options
        in_nominal = cohort.within_nominal(w.project, need)
        if (not in_nominal and options.starving_reclaim and options.starvation_seconds and w.preempted_by is None
                and self.starving(w)):
            q = cohort.quotas.get(w.project)
            in_nominal = q is not None and q.used[0] < q.nominal[0]
        swap = self._scarce_swap(w, cohort, pool, models)
        sliced = (options.timeslice and options.timeslice_seconds > 0 and need[0] >= options.timeslice_min_gpu
                  and bool(options.starvation_seconds) and self.starving(w))
        # Victim sets only shrink and claims only grow during a cycle: a failed search stays failed.
        key = (w.pool, w.project, w.priority, shape, w.replicas, models, in_nominal, sliced, bool(swap))
        if key in self.failed:
            return None
        state = self.state
        victims = state.victims
        # (A scale-up runs under its deployment's id: never its own victim.)
        own = self._live(w.pool, w.project, None, w.priority, self._own(w.pool, w.project))
        if w.id in state.running:
            own = [e for e in own if e[4].id != w.id]
        if sliced:  # after lower priorities: its own work of its priority that has had its slice, oldest first
            since = self.now.timestamp() - options.timeslice_seconds
            own = own + [(2, -r.priority, _ts(r.admitted_at), -r.id, r) for e in self._own(w.pool, w.project)
                    if (r := e[4]).priority == w.priority and r.id not in victims and r.admitted_at is not None
                    and _ts(r.admitted_at) <= since and r.id != w.id]
        if swap:  # after every other kind of victim (the entries' first field)
            mine = {e[4].id for e in own}
            own = own + [e for e in swap if e[4].id not in mine]
        if in_nominal:
            # Reclaim: other projects' borrowed work, whatever its priority.
            chosen = self._victims(w, cohort, pool, shape, need, models, own + self._borrowed(w, cohort, need))
        else:
            # Beyond its nominal a workload preempts its own project's lower priority work. Where it
            # would, it takes instead, if that is enough, lower priority work that other projects
            # run on borrowed quota (as Kueue's borrowWithinCohort): that quota is lent, not owned,
            # and the project keeps what it runs within its own. Only as a substitute: where its
            # own work would not do, it preempts nothing (and the search stays as cheap as that).
            chosen = self._victims(w, cohort, pool, shape, need, models, own)
            if chosen is not None:
                lent = self._borrowed(w, cohort, need, below=w.priority)
                if lent:
                    chosen = self._victims(w, cohort, pool, shape, need, models, own + lent) or chosen
        if chosen is None:
            self.failed.add(key)
            return None
        state.plan_and_hold(w, pool, shape, models, chosen)
        # Later workloads cannot take its quota (beyond what the victims give back).
        cohort.claim(w.project, need, freed=[(r.project, usage(r)) for r in chosen])
        taken = self.taken
        for r in chosen:
            victims.add(r.id)
            taken[(r.pool, r.project)] = taken.get((r.pool, r.project), 0) + 1
        names = ", ".join(str(r.id) for r in chosen)
        if any(e[4] is r for e in swap for r in chosen) and all(r.priority >= w.priority for r in chosen):
            why = "scarce GPU model: the victim may run on another model, or its project holds more than its share"
        elif not any(r.project != w.project for r in chosen):
            why = "higher priority" if all(r.priority > w.priority for r in chosen) else (
                f"time slice: its project's work past the bounded wait, after {options.timeslice_seconds / 3600:g} h "
                "of running")
        else:
            why = "quota reclaim" if in_nominal else "higher priority, on borrowed quota"
        preempts = [Preempt(r.id, w.id, f"Preempted by workload {w.id} ({why}, P{w.priority}).") for r in chosen]
        eta = self.now + timedelta(seconds=options.grace_seconds) if self.now else None
        return Wait(w.id, f"preempting: waiting for {len(chosen)} preempted workload(s) ({names}) to exit",
                    eta, kind=WaitKind.PREEMPTING), preempts

    def _scarce_swap(self, w, cohort: Cohort, pool: Pool, models) -> list[tuple]:
        """`scarce_swap`'s candidates for w: running work of its priority or lower, no bigger than w, on
        the nodes of w's models, that may run on another GPU model of the pool (entries ordered after
        every other kind of victim, the lowest priority and most recently admitted first); none unless
        w is limited to some of the pool's GPU models, past the bounded wait, and its project below its
        nominal GPUs. With `scarce_share`, also work limited to those models too, of another project
        holding more of their GPUs than its share of them (its nominal's part of the pool's GPUs), that
        has run a time slice, while w's project holds less than its share of them."""
        options = self.options
        if not options.scarce_swap or models is None or not options.starvation_seconds or not self.starving(w):
            return []
        info = self._scarce_info(pool, models)
        q = cohort.quotas.get(w.project)
        if info is None or q is None:
            return []
        gpu_models, held, entries, scarce_gpus, pool_gpus = info
        below_nominal = q.used[0] < q.nominal[0]

        def share(project: str) -> float:
            other = cohort.quotas.get(project)
            return (other.nominal[0] if other is not None else 0) * scarce_gpus / pool_gpus

        by_share = (options.scarce_share and options.timeslice_seconds > 0 and self.now is not None
                    and held.get(w.project, 0) < share(w.project))
        if not below_nominal and not by_share:
            return []
        since = self.now.timestamp() - options.timeslice_seconds if self.now is not None else 0.0
        asked = w.per_replica.gpu_milli * w.replicas
        protected_since = self._protected_since()
        victims = self.state.victims
        out = []
        for r in entries:
            if (r.id in victims or r.id == w.id or r.priority < w.priority
                    or r.per_replica.gpu_milli * len(r.placement) > asked):
                continue  # like for like: no victim bigger than w (a whole-node job would wait for a node)
            if (r.project != w.project and protected_since is not None and r.preemptions
                    and r.admitted_at is not None and r.admitted_at > protected_since):
                continue  # anti-thrash, as for reclaims
            allowed = allowed_models(r)
            if allowed is None or (allowed & gpu_models) - models:
                if not below_nominal:
                    continue
                if options.scarce_migrate and not pool.fits(
                        r.per_replica.as_tuple(), len(r.placement), frozenset(((allowed or gpu_models) & gpu_models) - models)):
                    continue  # nowhere else to go now
            elif (not by_share or r.project == w.project or r.admitted_at is None or _ts(r.admitted_at) > since
                  or held.get(r.project, 0) <= share(r.project)):
                continue  # it too may run only on these models, within its project's share of them
            out.append((SCARCE, -r.priority, -_ts(r.admitted_at), -r.id, r))
        return out

    def _scarce_info(self, pool: Pool, models):
        """For work limited to `models` on `pool`: the pool's GPU models, the GPU milli each project's
        running work holds on those models' nodes, the preemptible GPU work running there whose models
        are known, those models' GPUs and the pool's; None if `models` covers every GPU model of the
        pool. Built once per cycle (from the running work, before this cycle's admissions)."""
        key = (pool.name, models)
        if key not in self.scarce:
            gpu_models = {n.model for n in pool.nodes if n.ngpu}
            if not gpu_models - models:
                self.scarce[key] = None
            else:
                state = self.state
                held: dict[str, int] = {}
                entries = []
                for r in state.running.values():
                    there = sum(n.model in models for n, _ in state.allocs.get(r.id, ())) if r.pool == pool.name else 0
                    if not there:
                        continue
                    held[r.project] = held.get(r.project, 0) + r.per_replica.gpu_milli * there
                    if r.preemptible and not r.stopping and r.per_replica.gpu_milli and r.gpu_model is not None:
                        entries.append(r)
                self.scarce[key] = (gpu_models, held, entries,
                                    sum(n.ngpu for n in pool.nodes if n.model in models) * 1000,
                                    sum(n.ngpu for n in pool.nodes) * 1000)
        return self.scarce[key]

    def _borrowed(self, w, cohort: Cohort, need, below: int | None = None) -> list[tuple]:
        """Preemption candidates among other projects' work while those projects borrow what w
        needs (of lower priority than `below` if given); recently re-admitted victims are spared
        (anti-thrash)."""
        out: list[tuple] = []
        for project in sorted(cohort.borrowers):
            if project == w.project:
                continue
            # runs_borrowed reads only which resources a victim uses: one answer per such pattern.
            marks = cohort.reclaimable_for(project, need)
            if marks is None:
                continue
            g, c, m = marks
            for pattern, entries in self._reclaimable(w.pool, project).items():
                if (g and pattern[0]) or (c and pattern[1]) or (m and pattern[2]):
                    out.extend(self._live(w.pool, project, pattern, below, entries))
        return out

    def _live(self, pool: str, project: str, pattern, below: int | None, entries: list[tuple]) -> list[tuple]:
        """`entries` (one of the project's candidate lists, told apart by `pattern`) without the
        victims taken already, and, if `below` is given, of lower priority than `below` only; kept
        until the project loses another victim. Not to be changed by the caller."""
        key = (pool, project, pattern, below)
        taken = self.taken.get((pool, project), 0)
        found = self.live.get(key)
        if found is None or found[0] != taken:
            victims = self.state.victims
            if below is None:
                found = (taken, [e for e in entries if e[4].id not in victims])
            else:
                found = (taken, [e for e in entries if e[4].id not in victims and e[4].priority > below])
            self.live[key] = found
        return found[1]

    def _own(self, pool: str, project: str) -> list[tuple]:
        """A project's preemptible running work as victim-order entries (fixed for the cycle, so built
        once per project)."""
        found = self.own_entries.get((pool, project))
        if found is None:
            found = self.own_entries[(pool, project)] = [(1, -r.priority, -_ts(r.admitted_at), -r.id, r)
                                                         for r in self.state.candidates.get((pool, project), ())]
        return found

    def _reclaimable(self, pool: str, project: str) -> dict[tuple[bool, bool, bool], list[tuple]]:
        """A project's preemptible running work that another project may take while it borrows, by
        which resources it uses, as victim-order entries; recently re-admitted victims are left out
        (anti-thrash). Fixed for the cycle, so built once per project."""
        found = self.reclaimable.get((pool, project))
        if found is None:
            protected_since = self._protected_since()
            found = {}
            for r in self.state.candidates.get((pool, project), ()):
                if (protected_since is not None and r.preemptions and r.admitted_at is not None
                        and r.admitted_at > protected_since):
                    continue  # preempted before and re-admitted too recently: not again yet
                uses = r.per_replica.as_tuple()
                found.setdefault((bool(uses[0]), bool(uses[1]), bool(uses[2])), []).append(
                    (0, -r.priority, -_ts(r.admitted_at), -r.id, r))
            self.reclaimable[(pool, project)] = found
        return found

    def _victims(self, w, cohort: Cohort, pool: Pool, shape, need, models, candidates) -> list | None:
        """The minimal set of candidates whose exit lets w fit (quota and placement), or None.
        Leaves the cycle's state as it found it."""
        if not candidates:
            return None
        # Cheap bound first: even all candidates together may not free enough GPUs.
        releasable = sum(c[4].per_replica.gpu_milli * len(c[4].placement) for c in candidates)
        if pool.free_gpu + releasable < need[0]:
            return None
        # Borrowers first, then the lowest priority, then the most recently admitted (then submitted):
        # taken from a heap in that order (the entries' first four fields are unique), since the
        # search mostly stops after one or two.
        heap = list(candidates)
        heapq.heapify(heap)
        chosen: list[RunningWorkload] = []
        # A trial placement per step, unless the answer is known without one. One replica asking for a
        # GPU fits if and only if some node can take it (`Pool.can_take`), and a node's free capacity
        # only grows as candidates are released: once nothing fits with a set of candidates released
        # (`known`), only the nodes of candidates released beyond that set can take it. (Trials leave
        # the pool as they found it, so skipping one changes nothing else.)
        state = self.state
        single = w.replicas == 1 and shape[0] > 0
        known: set[int] | None = set() if single and (pool.name, shape, 1, models) in state.failed else None
        allocs = state.allocs

        def placeable(released: list[RunningWorkload]) -> bool:
            nonlocal known
            if not single:
                return pool.fits(shape, w.replicas, models)
            if known is None:
                ok = pool.fits(shape, 1, models)
            else:
                ok = any(pool.can_take(n, shape, models) for r in released if r.id not in known
                         for n, _ in allocs.get(r.id, ()))
            if not ok:
                known = {r.id for r in released}
            return ok

        fits = False
        while heap:
            kind, *_, r = heapq.heappop(heap)
            if (r.project != w.project and kind != SCARCE
                    and not cohort.runs_borrowed(r.project, r.per_replica.as_tuple(), need)):
                continue  # no longer borrowing after earlier victims: reclaim stops at its nominal
            state.release_running(r)
            chosen.append(r)
            if pool.free_gpu >= need[0] and cohort.check(w.project, need) is None and placeable(chosen):
                fits = True
                break
        if not fits:
            for r in reversed(chosen):
                state.release_running(r, sign=1)
            return None
        # Minimal set: give back every victim that turns out not to be needed.
        for r in list(reversed(chosen)):
            state.release_running(r, sign=1)
            rest = [x for x in chosen if x is not r]
            if cohort.check(w.project, need) is None and placeable(rest):
                chosen = rest
            else:
                state.release_running(r)
        for r in chosen:
            state.release_running(r, sign=1)
        return chosen

    def keep_claim(self, w, cohort: Cohort, pool: Pool, shape, need, models) -> bool:
        """A preemptor whose victims are still exiting keeps, for the rest of the cycle, the quota
        and the placement it will get once they are gone (as on the cycle it preempted them), so
        work ordered after it cannot take them in the meantime (and force another preemption)."""
        state = self.state
        victims = [r for i in state.awaiting[w.id] if (r := state.running.get(i)) is not None]
        for r in victims:
            state.release_running(r)
        fits = cohort.check(w.project, need) is None
        for r in reversed(victims):
            state.release_running(r, sign=1)
        if not fits or not state.plan_and_hold(w, pool, shape, models, victims):
            return False
        cohort.claim(w.project, need, freed=[(r.project, usage(r)) for r in victims])
        return True

    def _protected_since(self) -> datetime | None:
        """Workloads preempted before and re-admitted after this time are not reclaimed (None: no
        protection)."""
        if not self.options.repreempt_min_runtime_seconds or self.now is None:
            return None
        return self.now - timedelta(seconds=self.options.repreempt_min_runtime_seconds)


# Victim-order entries begin with their kind: reclaimable borrowed work 0, the project's own lower
# priorities 1, its own work past a time slice 2, and scarce_swap's candidates 3 (last; they may be of
# a project within its nominal, which a reclaim never takes).
SCARCE = 3


def _ts(t: datetime | None) -> float:
    return t.timestamp() if t is not None else 0.0
