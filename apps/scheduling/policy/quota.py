"""Quota, borrowing and budgets: the cohort of one pool (nominal, borrowing and lending limits,
claims held for waiting work, GPU-hour budgets) and the fair share the ordering reads from it."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from .snapshot import GPU, UNITS, PendingWorkload, QuotaState, WaitKind

_NONE = (0, 0, 0)


class QuotaBlock(NamedTuple):
    kind: str  # a WaitKind.QUOTA_*
    reason: str



class _Quota:
    __slots__ = ("state", "nominal", "used", "lend", "borrow", "hours_left", "version")

    def __init__(self, state: QuotaState):
        self.state = state
        self.nominal = state.nominal.as_tuple()
        self.used = [0, 0, 0]
        self.version = 0  # bumped on every change of its usage (for its memoised share)
        inf = math.inf
        lend = state.lending_limit_gpu_milli
        self.lend = (min(lend, self.nominal[0]) if lend is not None else self.nominal[0], self.nominal[1],
                     self.nominal[2])
        borrow = state.borrowing_limit_gpu_milli
        self.borrow = (borrow if borrow is not None else inf, inf, inf)
        self.hours_left = None if state.gpu_hour_budget is None else state.gpu_hour_budget - state.gpu_hours_used

    def draw(self, d: int, used: int) -> int:
        """How much of the cohort's lendable pool this quota takes with `used` in dimension d."""
        nominal, lend = self.nominal[d], self.lend[d]
        above = used - (nominal - lend)  # used beyond the part of its nominal it keeps (guaranteed)
        above = above if above > 0 else 0
        own_lendable = lend if lend < above else above
        return own_lendable + (used - nominal if used > nominal else 0)

    def share(self) -> float:
        best = 0.0
        for d in range(3):
            if self.used[d] > 0:
                best = max(best, self.used[d] / self.nominal[d] if self.nominal[d] else math.inf)
        return best

    def borrowing(self) -> bool:
        used, nominal = self.used, self.nominal
        return used[0] > nominal[0] or used[1] > nominal[1] or used[2] > nominal[2]


class Cohort:
    """The quotas of one pool: nominal, borrowing and lending arithmetic, kept incrementally."""

    def __init__(self, pool: str, quotas: Iterable[QuotaState]):
        self.pool = pool
        self.quotas = {q.project: _Quota(q) for q in quotas}
        self.capacity = [sum(q.lend[d] for q in self.quotas.values()) for d in range(3)]
        self.drawn = [0, 0, 0]
        self.version = 0  # bumped on every change of usage or budget (for memoised decisions)
        self.borrowers: set[str] = set()  # projects using more than their nominal
        # Quota held this cycle for waiting work (a reservation, a preemptor's claim): it counts
        # against the cohort, but it is not running work that others could reclaim.
        self.claimed: dict[str, list[int]] = {}

    def add(self, project: str, r: tuple[int, int, int], sign: int = 1) -> None:
        q = self.quotas.get(project)
        if q is None:
            return
        self.version += 1
        q.version += 1
        # _Quota.draw before and after, inlined (the cycle's most frequent call: every admission, and
        # every victim released and taken again in a preemption search).
        used, nominal, lend, drawn = q.used, q.nominal, q.lend, self.drawn
        borrowing = False
        for d in (0, 1, 2):
            u, n = used[d], nominal[d]
            delta = sign * r[d]
            if delta:
                k, keep = lend[d], n - lend[d]
                above = u - keep
                before = (k if k < above else above if above > 0 else 0) + (u - n if u > n else 0)
                u += delta
                used[d] = u
                above = u - keep
                drawn[d] += (k if k < above else above if above > 0 else 0) + (u - n if u > n else 0) - before
            if u > n:
                borrowing = True
        if borrowing:
            self.borrowers.add(project)
        else:
            self.borrowers.discard(project)

    def claim(self, project: str, need: tuple[int, int, int],
              freed: Iterable[tuple[str, tuple[int, int, int]]] = ()) -> None:
        """Hold `need` of the project's quota for a waiting workload, for the rest of the cycle.

        `freed`: (project, usage) of the running work whose end the claim waits for. The pool's
        lendable quota counts the claim only beyond what their end gives back: that quota is held
        once, by the work still on it, and not a second time for its successor (a reservation for
        8 GPUs would otherwise keep 8 GPUs of quota unused for as long as it waits)."""
        before = list(self.drawn)
        self.add(project, need)
        held = self.claimed.setdefault(project, [0, 0, 0])
        for d in range(3):
            held[d] += need[d]
        freed = list(freed)
        if not freed:
            return
        claimed = [self.drawn[d] - before[d] for d in range(3)]
        with_freed = list(self.drawn)
        for p, usage in freed:
            self.add(p, usage, sign=-1)
        back = [with_freed[d] - self.drawn[d] for d in range(3)]
        for p, usage in reversed(freed):
            self.add(p, usage)
        for d in range(3):
            self.drawn[d] -= max(0, min(claimed[d], back[d]))

    def runs_borrowed(self, project: str, uses: tuple[int, int, int], need: tuple[int, int, int]) -> bool:
        """Whether the project's running work, claims aside, uses more than its nominal of a resource
        that a victim using `uses` would give back and a preemptor needing `need` asks for: only then
        may another project reclaim that victim (a project borrowing GPUs keeps its CPU-only work
        from a preemptor that needs CPU)."""
        q = self.quotas.get(project)
        if q is None or project not in self.borrowers:
            return False
        held = self.claimed.get(project, _NONE)
        used, nominal = q.used, q.nominal
        return bool((uses[0] and need[0] and used[0] - held[0] > nominal[0])
                    or (uses[1] and need[1] and used[1] - held[1] > nominal[1])
                    or (uses[2] and need[2] and used[2] - held[2] > nominal[2]))

    def reclaimable_for(self, project: str, need: tuple[int, int, int]) -> tuple[bool, bool, bool] | None:
        """Per resource, whether `runs_borrowed` holds for a victim of the project using it (and no
        other): a victim's answer is whether it uses one of the resources marked. None: none is."""
        q = self.quotas.get(project)
        if q is None or project not in self.borrowers:
            return None
        held = self.claimed.get(project, _NONE)
        used, nominal = q.used, q.nominal
        marks = (bool(need[0]) and used[0] - held[0] > nominal[0], bool(need[1]) and used[1] - held[1] > nominal[1],
                 bool(need[2]) and used[2] - held[2] > nominal[2])
        return marks if marks[0] or marks[1] or marks[2] else None

    def within_nominal(self, project: str, need: tuple[int, int, int]) -> bool:
        q = self.quotas.get(project)
        if q is None:
            return False
        used, nominal = q.used, q.nominal
        return used[0] + need[0] <= nominal[0] and used[1] + need[1] <= nominal[1] and used[2] + need[2] <= nominal[2]

    def check(self, project: str, need: tuple[int, int, int]) -> QuotaBlock | None:
        """None if admitting `need` keeps the project within nominal + what it may borrow, else
        what blocks it."""
        q = self.quotas.get(project)
        if q is None:
            return QuotaBlock(WaitKind.QUOTA_NONE, f"quota: project '{project}' has no quota on pool '{self.pool}'")
        # The answer first, inlined (most checks pass, or fail the same way again and again); the
        # reason, when something blocks, from the loop below.
        used, nominal, lend, borrow, capacity, drawn = q.used, q.nominal, q.lend, q.borrow, self.capacity, self.drawn
        for d in (0, 1, 2):
            want = need[d]
            if not want:
                continue
            u, n = used[d], nominal[d]
            after = u + want
            if after > n + borrow[d]:
                break
            k, keep = lend[d], n - lend[d]
            above = u - keep
            before = (k if k < above else above if above > 0 else 0) + (u - n if u > n else 0)
            above = after - keep
            extra = (k if k < above else above if above > 0 else 0) + (after - n if after > n else 0) - before
            if extra > capacity[d] - drawn[d]:
                break
        else:
            return None
        for d, (unit, scale) in enumerate(UNITS):
            if need[d] == 0:
                continue
            after = q.used[d] + need[d]
            limit = q.nominal[d] + q.borrow[d]
            if after > limit:
                return QuotaBlock(WaitKind.QUOTA_LIMIT,
                                  f"quota: project '{project}' uses {q.used[d] / scale:g} {unit} on pool '{self.pool}' "
                                  f"(nominal {q.nominal[d] / scale:g}"
                                  + (f", may borrow {q.borrow[d] / scale:g}" if q.borrow[d] != math.inf else "")
                                  + f"); this workload needs {need[d] / scale:g}")
            extra = q.draw(d, after) - q.draw(d, q.used[d])
            free = self.capacity[d] - self.drawn[d]
            if extra > free:
                if after <= q.nominal[d]:
                    return QuotaBlock(WaitKind.QUOTA_LENT,
                                      f"quota: project '{project}' is within its nominal {q.nominal[d] / scale:g} {unit} "
                                      f"on pool '{self.pool}', but other projects have borrowed it; they are reclaimed "
                                      f"from borrowers when preemptible")
                own_free = max(0, q.nominal[d] - q.used[d])
                guaranteed_free = max(0, q.nominal[d] - q.lend[d] - q.used[d])
                can_get = max(0, min(limit - q.used[d], guaranteed_free + max(free, 0)))
                return QuotaBlock(WaitKind.QUOTA_LENDABLE,
                                  f"quota: project '{project}' has {own_free / scale:g} of its nominal "
                                  f"{q.nominal[d] / scale:g} {unit} free on pool '{self.pool}' and can borrow "
                                  f"{max(0, can_get - own_free) / scale:g} more from other projects; this workload "
                                  f"needs {need[d] / scale:g}")
        return None

    def budget_check(self, project: str, w: PendingWorkload, need_gpu: int) -> str | None:
        q = self.quotas.get(project)
        if q is None or q.hours_left is None or need_gpu == 0:
            return None
        budget = q.state.gpu_hour_budget
        needed = need_gpu / GPU * (w.expected_seconds or 0) / 3600
        if q.hours_left <= 0 or needed > q.hours_left:
            left = max(q.hours_left, 0)
            detail = f"; this workload needs up to {needed:g}" if needed else ""
            return (f"budget: project '{project}' has {left:.4g} of its {budget:g} GPU-hours left this "
                    f"{q.state.budget_period} on pool '{self.pool}'{detail}")
        return None

    def charge_budget(self, project: str, w: PendingWorkload, need_gpu: int) -> None:
        q = self.quotas.get(project)
        if q is not None and q.hours_left is not None and w.expected_seconds:
            q.hours_left -= need_gpu / GPU * w.expected_seconds / 3600
            self.version += 1
