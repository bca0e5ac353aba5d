"""Is a training job healthy? Hangs, stragglers and goodput, as pure functions over plain data.

No Django, no I/O: the reconcilers (apps/backends) gather what they observe (each rank's last
step and step times, when its log last grew) and ask here; the benchmark (bench/stragglers.py)
replays real traces through the same code. What to do about a verdict (restart with reason
Hung, cordon a SlowNode) is decided in apps/workloads/lifecycle.py.
"""
from __future__ import annotations

import statistics
from collections import deque
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


@dataclass(frozen=True)
class StragglerRule:
    """A rank is slow at a step when its step time is above `ratio` x the median of its peers' at
    that step, times its own baseline, and more than `z` robust standard deviations (1.4826 x
    MAD of the peers, at least `floor` x their median) above that median. It is a straggler when
    it was slow at `min_slow` of the last `window` steps all ranks reported.

    The baseline is the rank's usual ratio to its peers (the median over the steps before the
    window, `history` at most), clamped to 1 .. `tolerance`: a rank that has always been a little
    slower than the others (a slower GPU, a busier host: up to `tolerance`) is judged against its
    own normal, so only a rank that *became* slow, or one slower than the tolerance from the
    start, is flagged. `min_delta`: an absolute floor on how much slower. Defaults chosen with
    bench/stragglers.py (docs/benchmarks.md)."""

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

    @property
    def bound(self) -> int:
        """A rank slow at every step from some step on is flagged within this many steps."""
        return self.min_slow


def _ratio_to_peers(seconds: float, peers: list[float]) -> float | None:
    median = statistics.median(peers) if peers else 0.0
    return seconds / median if median > 0 else None


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
    spread = max(MAD_SCALE * mad, rule.floor * median)
    return seconds > rule.ratio * normal and seconds - normal > max(rule.z * spread, rule.min_delta)


def _baseline(ratios: list[float]) -> float:
    return statistics.median(ratios) if ratios else 1.0


@dataclass(frozen=True)
class Straggler:
    replica: int
    slow_steps: int  # of the window
    window: int
    ratio: float  # its median step time / the median of its peers', over the window

    def describe(self) -> str:
        return (f"Replica {self.replica} is a straggler: slower than its peers at {self.slow_steps} of the last "
                f"{self.window} steps, {self.ratio:.2f}x their median step time.")


def detect_stragglers(times: Mapping[int, Mapping[int, float]], rule: StragglerRule = StragglerRule()
                      ) -> list[Straggler]:
    """Stragglers among ranks from `times` (rank -> {step: seconds}): judged over the last
    `rule.window` steps every rank reported (the steps before them give each rank's baseline).
    Ranks that are all slow together (a slow job, not a straggler) are not flagged: each is
    compared with its peers at the same step."""
    if len(times) < 2:
        return []
    common = sorted(set.intersection(*(set(steps) for steps in times.values())))
    steps, before = common[-rule.window:], common[:-rule.window][-rule.history:]
    if len(steps) < rule.min_slow:
        return []
    found = []
    for rank, mine in times.items():
        def peers(step: int) -> list[float]:
            return [times[other][step] for other in times if other != rank]  # noqa: B023 - used at once

        baseline = _baseline([r for r in (_ratio_to_peers(mine[s], peers(s)) for s in before) if r is not None])
        slow = sum(slow_at(mine[s], peers(s), rule, baseline) for s in steps)
        if slow >= rule.min_slow:
            ratios = [r for r in (_ratio_to_peers(mine[s], peers(s)) for s in steps) if r is not None]
            found.append(Straggler(replica=rank, slow_steps=slow, window=len(steps),
                                   ratio=statistics.median(ratios) if ratios else 0.0))
    return found


@dataclass
class StragglerDetector:
    """The same rule over a stream of steps ({rank: seconds} per step), for replaying traces."""

    rule: StragglerRule = field(default_factory=StragglerRule)
    _verdicts: dict[int, deque] = field(default_factory=dict)
    _ratios: dict[int, deque] = field(default_factory=dict)

    def observe(self, step_times: Mapping[int, float]) -> set[int]:
        """Feed one step's times; returns the ranks flagged at this step."""
        ranks = list(step_times)
        flagged = set()
        for rank in ranks:
            peers = [step_times[o] for o in ranks if o != rank]
            ratios = self._ratios.setdefault(rank, deque(maxlen=self.rule.history + self.rule.window))
            history = list(ratios)[:-self.rule.window] if len(ratios) > self.rule.window else []
            verdicts = self._verdicts.setdefault(rank, deque(maxlen=self.rule.window))
            verdicts.append(slow_at(step_times[rank], peers, self.rule, _baseline(history)))
            ratio = _ratio_to_peers(step_times[rank], peers)
            if ratio is not None:
                ratios.append(ratio)
            if sum(verdicts) >= self.rule.min_slow:
                flagged.add(rank)
        return flagged


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
