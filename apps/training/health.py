"""Is a training job healthy? Hangs, stragglers and goodput, as pure functions over plain data.

No Django, no I/O: the reconcilers (apps/backends) gather what they observe (each rank's last
step and step times, when its log last grew) and ask here; the benchmark (bench/stragglers.py)
replays real traces through the same code. What to do about a verdict (restart with reason
Hung, cordon a SlowNode) is decided in apps/workloads/lifecycle.py.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# -- hangs ------------------------------------------------------------------------------------------

DEFAULT_HANG_TIMEOUT = 600  # seconds: 10 minutes without a step and without a line of output


def hang_timeout_of(spec: Mapping | None) -> float:
    """A job's `hang_timeout_seconds` (its spec), or the default."""
    value = (spec or {}).get("hang_timeout_seconds")
    return float(value) if isinstance(value, int | float) and value > 0 else float(DEFAULT_HANG_TIMEOUT)


@dataclass(frozen=True)
class RankActivity:
    """What Cairn last saw of one rank, as epoch seconds (None: never in this attempt)."""

    replica: int
    step_changed_at: float | None = None  # its reported step last moved
    output_at: float | None = None  # its log last grew
    done: bool = False  # it called cairn.finish(): shutting down (torch teardown can be slow), not hung


def hung_ranks(ranks: Iterable[RankActivity], *, now: float, started_at: float, timeout: float) -> list[int]:
    """The ranks that made no step progress and wrote no output for `timeout` seconds.

    Only for a job that reports progress (some rank has a step in this attempt): a script that
    does not use the SDK is never called hung, however quiet. A rank that never reported counts
    from the start of the attempt (a hang in the rendezvous is a hang too)."""
    ranks = list(ranks)
    if not any(rank.step_changed_at is not None for rank in ranks):
        return []
    hung = []
    for rank in ranks:
        if rank.done:
            continue
        last = max(t for t in (started_at, rank.step_changed_at, rank.output_at) if t is not None)
        if now - last >= timeout:
            hung.append(rank.replica)
    return hung


# -- stragglers ---------------------------------------------------------------------------------------

MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normal noise
KEPT_STEP_TIMES = 64  # step times kept per rank (apps/training/services.py): what the detector sees live
DEFAULT_EVICT_FRACTION = 0.25  # `evict` removes at most max(1 rank, this share of the gang) per decision


@dataclass(frozen=True)
class StragglerRule:
    """Three findings, each reported once per attempt with its evidence (docs/training.md):

    - a **slow group**: two or more ranks slower than their peers from the start (slow, by the
      test below with their usual ratio at `tolerance`, at `min_slow` of the first `window` steps
      all ranks reported). Ranks slow together from the first step share a cause (half a GPU
      each, a co-located job, a slower GPU model): a placement finding, which evicting one of them
      does not cure. One rank slow alone from the start is a straggler (a bad GPU or node).
    - a **straggler**: a rank slow at `min_slow` of the last `window` steps against its own
      history and its peers: its step time above `ratio` x what its usual time (its median over
      the `history` steps before the window) would be had it moved like its peers (the median of
      their times over their own usual ones), and more than `z` robust standard deviations of the
      peers' moves (1.4826 x MAD, at least `floor`) and `min_delta` above it. Whatever its group:
      a rank of a slow group that gets slower again is one; a group that stays as slow is not.
    - a **job-wide slowdown**: the ranks' median move (step time over their usual) at least
      `job_ratio` at `min_slow` of the window's steps: everyone slower, not a straggler.

    `slow_at` is the same comparison against the peers' step times directly, with the rank's
    usual ratio to them clamped to 1 .. `tolerance` (a rank always up to 10 % slower is normal).
    Defaults chosen with bench/stragglers.py (docs/benchmarks.md, which cases chose what)."""

    ratio: float = 1.15
    z: float = 1.0
    window: int = 10
    min_slow: int = 5
    floor: float = 0.05
    tolerance: float = 1.1
    history: int = 50
    # And at least this much slower, in the step times' unit (seconds live): a few milliseconds of
    # jitter on short steps on a busy host are no straggler worth an eviction.
    min_delta: float = 0.05
    job_ratio: float = 1.25

    @property
    def bound(self) -> int:
        """A rank slow at every step from some step on is flagged within this many steps (from the
        end of the first window: a rank slow from the start is judged when `window` steps are in)."""
        return self.min_slow


def _ratio_to_peers(seconds: float, peers: list[float]) -> float | None:
    median = statistics.median(peers) if peers else 0.0
    return seconds / median if median > 0 else None


def _slower(seconds: float, normal: float, spread: float, rule: StragglerRule) -> bool:
    return seconds > rule.ratio * normal and seconds - normal > max(rule.z * spread, rule.min_delta)


def slow_at(seconds: float, peers: list[float], rule: StragglerRule, baseline: float = 1.0) -> bool:
    """Is a step time of `seconds` slow against the same step's times of its peers, for a rank
    whose usual ratio to its peers is `baseline`?"""
    if not peers:
        return False
    median = statistics.median(peers)
    if median <= 0:
        return False
    normal = median * min(max(baseline, 1.0), rule.tolerance)
    mad = statistics.median([abs(p - median) for p in peers])
    return _slower(seconds, normal, max(MAD_SCALE * mad, rule.floor * median), rule)


def _became_slow(seconds: float, usual: float, peer_moves: list[float], rule: StragglerRule) -> bool:
    """Slower than its `usual` step time moved as its peers moved (each peer's time / its own usual)?"""
    if not peer_moves or usual <= 0:
        return False
    move = statistics.median(peer_moves)
    mad = statistics.median([abs(m - move) for m in peer_moves])
    return _slower(seconds, usual * move, usual * max(MAD_SCALE * mad, rule.floor * move), rule)


@dataclass(frozen=True)
class Straggler:
    replica: int
    slow_steps: int  # of the window
    window: int
    ratio: float  # its step time / the median of its peers', median over its slow steps
    since: int | None = None  # its first slow step seen (a straggler from the start: the first step)
    own_ratio: float | None = None  # its step time / its own usual, over its slow steps (None: slow from the start)
    group: tuple[int, ...] = ()  # the slow group it was part of from the start

    def describe(self) -> str:
        since = f" since step {self.since}" if self.since is not None else ""
        own = (f", {self.own_ratio:.2f}x its own usual step time" if self.own_ratio is not None
               else ", from the start")
        group = (f" (of the slow group {', '.join(map(str, self.group))}, which got slower again)"
                 if self.group else "")
        return (f"Replica {self.replica} is a straggler{group}: slower than its peers at {self.slow_steps} of the "
                f"last {self.window} steps{since}, {self.ratio:.2f}x their median step time{own}.")

    def as_json(self) -> dict:
        return {"replica": self.replica, "ratio": round(self.ratio, 3), "since": self.since,
                "own_ratio": None if self.own_ratio is None else round(self.own_ratio, 3), "group": list(self.group)}


@dataclass(frozen=True)
class SlowGroup:
    """Ranks slower than the others together from the start: where they run is the lead."""

    ranks: tuple[int, ...]
    ratio: float  # their median step time / the median of the ranks outside the group, over the first steps
    since: int  # the first step all ranks reported

    def describe(self) -> str:
        return (f"Replicas {', '.join(map(str, self.ranks))} have been slower than the others together since step "
                f"{self.since}, {self.ratio:.2f}x their median step time: a placement finding (shared GPUs, a "
                "co-located job, a slower GPU model), not stragglers; none is evicted for it.")

    def as_json(self) -> dict:
        return {"ranks": list(self.ranks), "ratio": round(self.ratio, 3), "since": self.since}


@dataclass(frozen=True)
class JobSlowdown:
    ratio: float  # the ranks' median step time / their own usual, median over the slowed steps
    since: int
    slow_steps: int
    window: int

    def describe(self) -> str:
        return (f"The whole job slowed down since step {self.since}: its ranks take {self.ratio:.2f}x their usual "
                f"step time together ({self.slow_steps} of the last {self.window} steps). Not a straggler: look at "
                "what they share (input pipeline, storage, network).")

    def as_json(self) -> dict:
        return {"ratio": round(self.ratio, 3), "since": self.since}


@dataclass(frozen=True)
class Reference:
    """What the first `window` steps all ranks reported said: the slow groups and the ranks slow
    alone. Fixed once known (the reconciler only keeps the last steps)."""

    groups: tuple[SlowGroup, ...] = ()
    alone: tuple[Straggler, ...] = ()

    def as_json(self) -> dict:
        return {"groups": [g.as_json() for g in self.groups],
                "alone": [{**s.as_json(), "slow_steps": s.slow_steps, "window": s.window} for s in self.alone]}

    @classmethod
    def from_json(cls, data: Mapping) -> Reference:
        groups = tuple(SlowGroup(ranks=tuple(int(r) for r in g["ranks"]), ratio=float(g["ratio"]), since=int(g["since"]))
                       for g in data.get("groups", []))
        alone = tuple(Straggler(replica=int(s["replica"]), slow_steps=int(s["slow_steps"]), window=int(s["window"]),
                                ratio=float(s["ratio"]), since=s.get("since"))
                      for s in data.get("alone", []))
        return cls(groups=groups, alone=alone)


@dataclass(frozen=True)
class StragglerReport:
    groups: tuple[SlowGroup, ...] = ()
    stragglers: tuple[Straggler, ...] = ()
    slowdown: JobSlowdown | None = None
    reference: Reference | None = None  # None: fewer than `window` steps all ranks reported yet

    def __bool__(self) -> bool:
        return bool(self.groups or self.stragglers or self.slowdown)


def _common_steps(times: Mapping[int, Mapping[int, float]]) -> list[int]:
    return sorted(set.intersection(*(set(steps) for steps in times.values()))) if times else []


def _reference(times: Mapping[int, Mapping[int, float]], steps: list[int], rule: StragglerRule) -> Reference:
    """Slow from the start: slow at `min_slow` of `steps` against their peers, even allowing them
    `tolerance`. Two or more whose ratios to the others are close (no gap wider than `ratio` x
    `tolerance` between them) are a group; a rank alone is a straggler."""
    def peers(rank: int, step: int) -> list[float]:
        return [times[other][step] for other in times if other != rank]

    slow = {rank: n for rank in times
            if (n := sum(slow_at(times[rank][s], peers(rank, s), rule, rule.tolerance) for s in steps)) >= rule.min_slow}
    others = [rank for rank in times if rank not in slow] or list(times)
    ratios = {}
    for rank in slow:
        values = [r for s in steps if (r := _ratio_to_peers(times[rank][s], [times[o][s] for o in others if o != rank]))
                  is not None]
        ratios[rank] = statistics.median(values) if values else 0.0
    runs: list[list[int]] = []
    for rank in sorted(slow, key=lambda r: ratios[r]):
        if runs and ratios[rank] <= ratios[runs[-1][-1]] * rule.ratio * rule.tolerance:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    groups = tuple(SlowGroup(ranks=tuple(sorted(run)), ratio=statistics.median(ratios[r] for r in run), since=steps[0])
                   for run in runs if len(run) >= 2)
    alone = tuple(Straggler(replica=run[0], slow_steps=slow[run[0]], window=len(steps), ratio=ratios[run[0]],
                            since=steps[0]) for run in runs if len(run) == 1)
    return Reference(groups=groups, alone=alone)


def analyse_stragglers(times: Mapping[int, Mapping[int, float]], rule: StragglerRule = StragglerRule(),
                       reference: Reference | None = None) -> StragglerReport:
    """Slow groups, stragglers and a job-wide slowdown from `times` (rank -> {step: seconds}),
    over the steps every rank reported: the first `window` of them are the reference (unless
    `reference` is given, from an earlier pass), the last `window` are judged against each rank's
    usual time over the `history` steps before them."""
    if len(times) < 2:
        return StragglerReport()
    common = _common_steps(times)
    if reference is None and len(common) >= rule.window:
        reference = _reference(times, common[:rule.window], rule)
    if reference is None:
        return StragglerReport()
    groups = tuple(g for g in reference.groups if all(r in times for r in g.ranks))
    found = {s.replica: s for s in reference.alone if s.replica in times}
    window, before = common[-rule.window:], common[:-rule.window][-rule.history:]
    slowdown = None
    if len(window) >= rule.min_slow and len(before) >= rule.min_slow:
        usual = {rank: statistics.median(mine[s] for s in before) for rank, mine in times.items()}
        if all(u > 0 for u in usual.values()):
            moves = {s: {rank: times[rank][s] / usual[rank] for rank in times} for s in window}
            for rank, mine in times.items():
                slow = [s for s in window if _became_slow(mine[s], usual[rank],
                                                          [m for r, m in moves[s].items() if r != rank], rule)]
                if len(slow) < rule.min_slow:
                    continue
                # the evidence is taken over its slow steps: at the first report half the window is before the onset
                ratios = [r for r in (_ratio_to_peers(mine[s], [times[o][s] for o in times if o != rank])
                                      for s in slow) if r is not None]
                group = next((g.ranks for g in groups if rank in g.ranks), ())
                found[rank] = Straggler(replica=rank, slow_steps=len(slow), window=len(window),
                                        ratio=statistics.median(ratios) if ratios else 0.0, since=slow[0],
                                        own_ratio=statistics.median(moves[s][rank] for s in slow), group=group)
            job = {s: statistics.median(moves[s].values()) for s in window}
            slowed = [s for s in window if job[s] >= rule.job_ratio]
            if len(slowed) >= rule.min_slow:
                slowdown = JobSlowdown(ratio=statistics.median(job[s] for s in slowed), since=slowed[0],
                                       slow_steps=len(slowed), window=len(window))
    return StragglerReport(groups=groups, stragglers=tuple(found[r] for r in sorted(found)), slowdown=slowdown,
                           reference=reference)


def detect_stragglers(times: Mapping[int, Mapping[int, float]], rule: StragglerRule = StragglerRule()
                      ) -> list[Straggler]:
    """The stragglers of `analyse_stragglers` (a slow group is none, a job-wide slowdown neither)."""
    return list(analyse_stragglers(times, rule).stragglers)


@dataclass
class StragglerTracker:
    """Reports each finding once per attempt. Its `state` is plain JSON: the reconciler keeps it
    in the workload's runtime between passes (the reference, what was reported)."""

    rule: StragglerRule = field(default_factory=StragglerRule)
    state: dict = field(default_factory=dict)

    @property
    def reference(self) -> Reference | None:
        data = self.state.get("reference")
        return Reference.from_json(data) if data is not None else None

    def update(self, times: Mapping[int, Mapping[int, float]]) -> StragglerReport:
        """Judge `times` (each rank's recent step times); returns only what was not reported before."""
        reference = self.reference
        report = analyse_stragglers(times, self.rule, reference)
        groups: tuple[SlowGroup, ...] = ()
        if reference is None and report.reference is not None:
            self.state["reference"] = report.reference.as_json()
            groups = report.groups
        known = set(self.state.get("stragglers", []))
        new = tuple(s for s in report.stragglers if s.replica not in known)
        if new:
            self.state["stragglers"] = sorted(known | {s.replica for s in new})
        slowdown = None
        if report.slowdown is not None and not self.state.get("slowdown"):
            self.state["slowdown"] = report.slowdown.as_json()
            slowdown = report.slowdown
        return StragglerReport(groups=groups, stragglers=new, slowdown=slowdown, reference=report.reference)


@dataclass
class StragglerDetector:
    """The tracker over a stream of steps ({rank: seconds} per step), keeping what the reconciler
    keeps (the last `keep` step times per rank): for replaying traces."""

    rule: StragglerRule = field(default_factory=StragglerRule)
    keep: int = KEPT_STEP_TIMES
    tracker: StragglerTracker | None = None
    findings: list[tuple[int, Straggler | SlowGroup | JobSlowdown]] = field(default_factory=list)
    _times: dict[int, dict[int, float]] = field(default_factory=dict)
    _next: int = 0

    def __post_init__(self) -> None:
        if self.tracker is None:
            self.tracker = StragglerTracker(self.rule)

    def observe(self, step_times: Mapping[int, float], step: int | None = None) -> set[int]:
        """Feed one step's times; returns the ranks reported as stragglers at this step (each once
        per run; `findings` has every finding with the step it was reported at)."""
        step = self._next if step is None else step
        self._next = step + 1
        for rank, seconds in step_times.items():
            mine = self._times.setdefault(rank, {})
            mine[step] = seconds
            if len(mine) > self.keep:
                del mine[min(mine)]
        report = self.tracker.update(self._times)
        for finding in (*report.groups, *report.stragglers, *([report.slowdown] if report.slowdown else [])):
            self.findings.append((step, finding))
        return {s.replica for s in report.stragglers}


def evictable(stragglers: Iterable[int], *, replicas: int, groups: Iterable[Iterable[int]] = (),
              fraction: float = DEFAULT_EVICT_FRACTION) -> tuple[list[int], str | None]:
    """The ranks one `evict` decision may remove: all the new `stragglers`, or none, with the
    reason. At most max(1, `fraction` x `replicas`) ranks, and never a whole speed group (a slow
    group from the start, or every rank outside them): so many slow ranks at once say more about
    where the job runs, or about the job, than about bad nodes."""
    wanted = sorted(set(stragglers))
    cap = max(1, int(fraction * replicas))
    if len(wanted) > cap:
        return [], (f"{len(wanted)} ranks ({', '.join(map(str, wanted))}) would be evicted at once; the evict policy "
                    f"removes at most {cap} of {replicas} in one decision (max(1, {fraction:.0%})).")
    groups = [sorted(set(g)) for g in groups]
    grouped = {r for g in groups for r in g}
    speed_groups = groups + ([sorted(set(range(replicas)) - grouped)] if groups else [])
    for group in speed_groups:
        if group and set(group) <= set(wanted):
            return [], (f"ranks {', '.join(map(str, wanted))} would evict the whole speed group "
                        f"{', '.join(map(str, group))}: a slower group is a placement finding, not a bad node.")
    return wanted, None


# -- goodput ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AttemptSpan:
    """One attempt of a training job, in epoch seconds: when it started and ended (None: running),
    whether it ended in a failure Cairn restarted it from, when its first step was reported (the
    end of the restart overhead), when its last checkpoint was saved (work after it is lost at a
    failure) and, for an attempt found hung, when it stopped making progress."""

    started_at: float
    ended_at: float | None = None
    failed: bool = False
    first_step_at: float | None = None
    last_checkpoint_at: float | None = None
    hung_at: float | None = None


@dataclass(frozen=True)
class AttemptLoss:
    """What one attempt cost: `lost` (work since its last checkpoint at its failure, of which
    `hung` was spent stuck) and `overhead` (the gap before it and its start-up to its first step)."""

    lost: float = 0.0
    hung: float = 0.0
    overhead: float = 0.0

    @property
    def redone(self) -> float:
        return self.lost - self.hung


@dataclass(frozen=True)
class Goodput:
    wall_seconds: float
    productive_seconds: float
    lost_seconds: float  # work lost since the last checkpoint at each failure (redone + hung)
    overhead_seconds: float  # restarts: from each attempt's start to its first step
    gpu_hours_lost: float
    hung_seconds: float = 0.0  # of lost_seconds: the time hung attempts made no progress before Cairn saw it

    @property
    def ratio(self) -> float | None:
        return self.productive_seconds / self.wall_seconds if self.wall_seconds > 0 else None

    @property
    def redone_seconds(self) -> float:
        """Of lost_seconds: the steps since the last checkpoint the next attempt did again."""
        return max(self.lost_seconds - self.hung_seconds, 0.0)


def attempt_losses(attempts: list[AttemptSpan], *, now: float) -> list[AttemptLoss]:
    """Per attempt (in the order given, sorted by start): see `goodput`."""
    out = []
    previous_end = None
    for index, attempt in enumerate(attempts):
        end = attempt.ended_at if attempt.ended_at is not None else now
        overhead = lost = hung = 0.0
        if index > 0:
            if previous_end is not None:
                overhead += max(attempt.started_at - previous_end, 0.0)
            first = attempt.first_step_at if attempt.first_step_at is not None else end
            overhead += max(min(first, end) - attempt.started_at, 0.0)
        if attempt.failed:  # the work since its last checkpoint is redone by the next attempt
            if attempt.last_checkpoint_at is not None:
                since = attempt.last_checkpoint_at
            elif index == 0:
                since = attempt.started_at
            else:  # its start-up is counted as overhead already
                since = attempt.first_step_at if attempt.first_step_at is not None else end
            lost = max(end - since, 0.0)
            if attempt.hung_at is not None:  # stuck from then on: nothing done, not even work to redo
                hung = min(max(end - attempt.hung_at, 0.0), lost)
        out.append(AttemptLoss(lost=lost, hung=hung, overhead=overhead))
        previous_end = end
    return out


def goodput(attempts: list[AttemptSpan], *, now: float, gpus: float) -> Goodput:
    """Productive time / wall time of a job. Lost: at each failed attempt, the time from its last
    checkpoint (or, with none, from its first step) to its end, of which a hung attempt spent
    the part from `hung_at` stuck; overhead: the start-up of every attempt after the first
    (launch, rendezvous, loading the checkpoint) until its first step, and the gap between a
    failure and the next start. `gpus`: GPUs the job holds (all replicas)."""
    if not attempts:
        return Goodput(0.0, 0.0, 0.0, 0.0, 0.0)
    attempts = sorted(attempts, key=lambda a: a.started_at)
    end_of_job = attempts[-1].ended_at if attempts[-1].ended_at is not None else now
    wall = max(end_of_job - attempts[0].started_at, 0.0)
    losses = attempt_losses(attempts, now=now)
    lost = min(sum(loss.lost for loss in losses), wall)
    hung = min(sum(loss.hung for loss in losses), lost)
    overhead = min(sum(loss.overhead for loss in losses), wall - lost)
    productive = max(wall - lost - overhead, 0.0)
    return Goodput(wall_seconds=wall, productive_seconds=productive, lost_seconds=lost, overhead_seconds=overhead,
                   gpu_hours_lost=(lost + overhead) * gpus / 3600.0, hung_seconds=hung)


def peer_ratios(times: Mapping[int, Mapping[int, float]], *, window: int = StragglerRule.window
                ) -> dict[int, float | None]:
    """How much slower each rank is than its peers: the median, over the last `window` steps all
    ranks reported, of its step time / the median of the others' at that step (1.0: as fast;
    None: fewer than two ranks or no common step). What the dashboard shows next to a straggler."""
    if len(times) < 2:
        return {rank: None for rank in times}
    steps = sorted(set.intersection(*(set(s) for s in times.values())))[-window:]
    out: dict[int, float | None] = {}
    for rank, mine in times.items():
        ratios = [r for r in (_ratio_to_peers(mine[s], [times[o][s] for o in times if o != rank]) for s in steps)
                  if r is not None]
        out[rank] = statistics.median(ratios) if ratios else None
    return out
