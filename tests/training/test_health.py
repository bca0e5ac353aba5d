"""The pure rules of apps/training/health.py and the self-healing decisions of lifecycle.decide."""
import random

import pytest

from apps.training.health import (
    AttemptSpan,
    JobSlowdown,
    RankActivity,
    SlowGroup,
    Straggler,
    StragglerDetector,
    StragglerRule,
    StragglerTracker,
    analyse_stragglers,
    attempt_losses,
    detect_stragglers,
    evictable,
    goodput,
    hung_ranks,
    peer_ratios,
)
from apps.workloads.lifecycle import FAIL, MOVE, RESTART, AttemptFailed, Facts, decide

# -- hangs --

def test_a_rank_without_step_or_output_for_the_timeout_is_hung():
    ranks = [RankActivity(0, step_changed_at=100.0, output_at=95.0), RankActivity(1, step_changed_at=30.0, output_at=40.0)]
    assert hung_ranks(ranks, now=105.0, started_at=0.0, timeout=60) == [1]
    assert hung_ranks(ranks, now=99.0, started_at=0.0, timeout=60) == []  # 59 s: not yet


def test_output_alone_keeps_a_rank_alive_and_progress_alone_too():
    assert hung_ranks([RankActivity(0, step_changed_at=0.0, output_at=90.0)], now=100, started_at=0, timeout=60) == []
    assert hung_ranks([RankActivity(0, step_changed_at=90.0, output_at=0.0)], now=100, started_at=0, timeout=60) == []


def test_a_job_that_never_reports_progress_is_never_hung():
    assert hung_ranks([RankActivity(0, output_at=0.0), RankActivity(1)], now=10_000, started_at=0, timeout=60) == []


def test_a_rank_that_never_reported_counts_from_the_attempt_start():
    ranks = [RankActivity(0, step_changed_at=990.0), RankActivity(1)]
    assert hung_ranks(ranks, now=1000, started_at=100, timeout=600) == [1]
    assert hung_ranks(ranks, now=1000, started_at=500, timeout=600) == []


# -- stragglers --

def _times(per_rank: dict[int, float], steps=range(20), slow_from=0, slow=None):
    slow = slow or {}
    return {r: {s: (slow[r] if r in slow and s >= slow_from else base) for s in steps} for r, base in per_rank.items()}


def test_one_persistently_slow_rank_is_flagged():
    times = _times({0: 1.0, 1: 1.02, 2: 0.98, 3: 1.01}, slow={2: 1.6})
    found = detect_stragglers(times)
    assert [s.replica for s in found] == [2] and found[0].ratio == pytest.approx(1.6, rel=0.05)


def test_two_ranks_one_slow_is_a_straggler():
    assert [s.replica for s in detect_stragglers(_times({0: 0.05, 1: 0.05}, slow={1: 0.3}))] == [1]


def test_a_slow_job_all_ranks_slow_together_is_not_a_straggler():
    assert detect_stragglers(_times({0: 3.0, 1: 3.1, 2: 2.9, 3: 3.0})) == []


def test_noise_and_short_blips_are_not_stragglers():
    times = _times({0: 1.0, 1: 1.08, 2: 0.93, 3: 1.1})  # 10 % heterogeneity
    times[1][5] = times[1][6] = 2.5  # a two-step blip
    assert detect_stragglers(times) == []


def test_flagged_within_the_bound_after_the_onset():
    rule = StragglerRule()
    detector = StragglerDetector(rule)
    flagged_at = None
    for step in range(40):
        times = {r: 1.0 + 0.01 * r for r in range(8)}
        if step >= 20:
            times[5] = 1.5
        if detector.observe(times) and flagged_at is None:
            flagged_at = step
    assert flagged_at is not None and flagged_at - 20 < rule.bound


def test_a_rank_always_a_little_slower_is_judged_against_its_own_normal():
    steps = range(60)
    times = {r: {s: 1.0 for s in steps} for r in range(6)}
    for s in steps:
        times[2][s] = 1.08 if s < 50 else 1.2  # habitually 8 % slower, bursts to 1.2x at the end
    assert detect_stragglers(times) == []
    times[4] = {s: (1.0 if s < 50 else 1.3) for s in steps}  # became 30 % slower
    assert [s.replica for s in detect_stragglers(times)] == [4]


def test_jitter_on_short_steps_is_no_straggler():
    times = {0: {s: 0.050 for s in range(20)}, 1: {s: 0.050 + (0.03 if s % 2 else 0.0) for s in range(20)}}
    assert detect_stragglers(times) == []  # 60 % slower at half the steps, but by 30 ms
    times[1] = {s: 0.30 for s in range(20)}
    assert [s.replica for s in detect_stragglers(times)] == [1]


def test_too_few_common_steps_flag_nothing():
    assert detect_stragglers(_times({0: 1.0, 1: 5.0}, steps=range(3))) == []
    assert detect_stragglers({0: {1: 1.0}}) == []


# -- slow groups, new stragglers, job-wide slowdowns (streams with noise, as the trace replays) --

def _stream(speeds: dict[int, float], steps: int, *, changes=(), seed=0, noise=0.03):
    """[{rank: seconds}] per step: each rank at its speed with ~3 % noise; `changes`: (rank or None
    for every rank, from step, until step or None, factor) applied on top."""
    rng = random.Random(seed)
    out = []
    for step in range(steps):
        times = {}
        for rank, speed in speeds.items():
            factor = 1.0
            for who, start, end, by in changes:
                if (who is None or who == rank) and step >= start and (end is None or step < end):
                    factor *= by
            times[rank] = speed * factor * (1 + rng.uniform(-noise, noise))
        out.append(times)
    return out


def _replay(stream, rule=StragglerRule()):
    detector = StragglerDetector(rule)
    first: dict[int, int] = {}
    for step, times in enumerate(stream):
        for rank in detector.observe(times):
            first.setdefault(rank, step)
    return first, detector.findings


def _as_times(stream):
    return {rank: {step: times[rank] for step, times in enumerate(stream)} for rank in stream[0]}


def test_a_group_slow_from_the_start_is_a_placement_finding_not_stragglers():
    stream = _stream({0: 1.0, 1: 1.0, 2: 3.5, 3: 3.5}, 120)
    assert detect_stragglers(_as_times(stream)) == []  # today's rule flagged 2 and 3 for the whole run
    first, findings = _replay(stream)
    assert first == {}
    groups = [f for _, f in findings if isinstance(f, SlowGroup)]
    assert len(findings) == len(groups) == 1  # reported once
    assert groups[0].ranks == (2, 3) and groups[0].ratio == pytest.approx(3.5, rel=0.05) and groups[0].since == 0
    assert "placement" in groups[0].describe()


def test_half_the_gang_slower_from_the_start_is_one_group():
    stream = _stream({r: (3.5 if r >= 5 else 1.0) for r in range(10)}, 120, seed=1)
    first, findings = _replay(stream)
    assert first == {}
    assert [f.ranks for _, f in findings] == [(5, 6, 7, 8, 9)]


def test_a_late_4x_onset_inside_a_slow_group_is_a_new_straggler_reported_at_the_onset():
    rule = StragglerRule()
    onset = 200
    stream = _stream({r: (3.5 if r >= 5 else 1.0) for r in range(10)}, 260, changes=[(6, onset, None, 4.0),
                                                                                        (8, onset, None, 4.0)], seed=2)
    first, findings = _replay(stream, rule)
    # today's rule had flagged 5-9 from the first steps: nothing said that 6 and 8 just got worse
    assert set(first) == {6, 8}
    assert all(onset <= at < onset + rule.bound for at in first.values())
    stragglers = [f for _, f in findings if isinstance(f, Straggler)]
    assert all(s.group == (5, 6, 7, 8, 9) and s.own_ratio == pytest.approx(4.0, rel=0.1) and s.since == onset
               for s in stragglers)
    assert "got slower again" in stragglers[0].describe()


def test_a_fast_rank_turning_slow_is_a_straggler_whatever_the_split():
    stream = _stream({r: (3.5 if r >= 5 else 1.0) for r in range(10)}, 150, changes=[(1, 100, None, 4.0)], seed=3)
    first, _ = _replay(stream)
    assert list(first) == [1] and 100 <= first[1] < 100 + StragglerRule().bound


def test_a_job_wide_slowdown_is_reported_once_and_flags_no_straggler():
    stream = _stream({r: 1.0 + 0.02 * r for r in range(8)}, 150, changes=[(None, 80, None, 2.0)], seed=4)
    first, findings = _replay(stream)
    assert first == {}
    assert len(findings) == 1 and isinstance(findings[0][1], JobSlowdown)
    at, slowdown = findings[0]
    assert 80 <= at < 80 + StragglerRule().bound and slowdown.since >= 80
    assert slowdown.ratio == pytest.approx(2.0, rel=0.1)


def test_a_slow_rank_that_recovers_is_reported_once_and_nothing_after():
    stream = _stream({r: 1.0 for r in range(6)}, 200, changes=[(2, 60, 90, 2.0)], seed=5)
    first, findings = _replay(stream)
    assert list(first) == [2] and 60 <= first[2] < 60 + StragglerRule().bound
    assert len(findings) == 1


def test_workers_steadily_up_to_30_percent_apart_flag_nothing():
    for seed in range(5):
        stream = _stream({r: 1.0 + 0.3 * r / 9 for r in range(10)}, 200, seed=seed, noise=0.05)
        assert _replay(stream)[1] == []


def test_one_rank_slow_alone_from_the_start_is_a_straggler_not_a_group():
    stream = _stream({0: 1.0, 1: 1.0, 2: 1.0, 3: 2.0}, 40, seed=6)
    first, findings = _replay(stream)
    assert first == {3: StragglerRule().window - 1}  # judged when the first window is in
    assert [type(f) for _, f in findings] == [Straggler] and findings[0][1].own_ratio is None


def test_the_tracker_state_survives_a_round_trip_through_json_and_keeps_the_reference():
    import json

    stream = _stream({0: 1.0, 1: 1.0, 2: 3.5, 3: 3.5}, 30)
    tracker = StragglerTracker()
    assert tracker.update(_as_times(stream)).groups[0].ranks == (2, 3)
    again = StragglerTracker(state=json.loads(json.dumps(tracker.state)))
    # later, the kept steps no longer include the start: the group is known, not reported again
    later = {r: dict(list(steps.items())[-12:]) for r, steps in _as_times(stream).items()}
    assert not again.update(later)
    assert analyse_stragglers(later, reference=again.reference).groups[0].ranks == (2, 3)


# -- eviction safety --

def test_evict_removes_at_most_a_quarter_of_the_gang_or_one_rank():
    assert evictable([3], replicas=2) == ([3], None)
    assert evictable([1], replicas=4) == ([1], None)
    ranks, why = evictable([1, 2], replicas=4)
    assert ranks == [] and "at most 1 of 4" in why
    assert evictable([6, 8], replicas=10, groups=[(5, 6, 7, 8, 9)]) == ([6, 8], None)
    assert evictable([1, 2, 3], replicas=10)[0] == []
    assert evictable([1, 2, 3], replicas=10, fraction=0.5) == ([1, 2, 3], None)


def test_evict_never_removes_a_whole_speed_group():
    ranks, why = evictable([2, 3], replicas=8, groups=[(2, 3)])
    assert ranks == [] and "whole speed group 2, 3" in why
    ranks, why = evictable([0, 1], replicas=8, groups=[(2, 3, 4, 5, 6, 7)])  # every rank outside the slow group
    assert ranks == [] and "whole speed group 0, 1" in why


# -- goodput --

def test_goodput_counts_work_after_the_last_checkpoint_and_restart_overhead_as_lost():
    attempts = [AttemptSpan(started_at=0, ended_at=100, failed=True, first_step_at=10, last_checkpoint_at=80),
                AttemptSpan(started_at=105, ended_at=200, first_step_at=115)]
    result = goodput(attempts, now=300, gpus=8)
    assert result.wall_seconds == 200
    assert result.lost_seconds == 20  # 80 -> 100
    assert result.overhead_seconds == 15  # gap 100 -> 105 and start-up 105 -> 115
    assert result.ratio == pytest.approx(165 / 200)
    assert result.gpu_hours_lost == pytest.approx(35 * 8 / 3600)


def test_without_checkpoints_a_failure_loses_the_whole_attempt():
    attempts = [AttemptSpan(started_at=0, ended_at=100, failed=True, first_step_at=10),
                AttemptSpan(started_at=100, ended_at=None, first_step_at=110)]
    result = goodput(attempts, now=150, gpus=1)
    assert (result.lost_seconds, result.overhead_seconds, result.productive_seconds) == (100, 10, 40)


def test_a_hung_attempt_splits_its_lost_work_into_hung_and_redone():
    # checkpoint at 40, stuck from 70 (no progress, no output), restarted at 100
    attempts = [AttemptSpan(started_at=0, ended_at=100, failed=True, first_step_at=5, last_checkpoint_at=40,
                            hung_at=70),
                AttemptSpan(started_at=102, ended_at=150, first_step_at=110)]
    result = goodput(attempts, now=200, gpus=2)
    assert (result.lost_seconds, result.hung_seconds, result.redone_seconds) == (60, 30, 30)
    assert result.overhead_seconds == 10  # gap 100 -> 102, start-up 102 -> 110
    assert [(a.lost, a.hung, a.overhead) for a in attempt_losses(attempts, now=200)] == [(60, 30, 0), (0, 0, 10)]


def test_hung_time_is_never_more_than_the_work_lost():
    attempts = [AttemptSpan(started_at=0, ended_at=100, failed=True, last_checkpoint_at=90, hung_at=50),
                AttemptSpan(started_at=100, ended_at=120, first_step_at=101)]
    result = goodput(attempts, now=200, gpus=1)
    assert (result.lost_seconds, result.hung_seconds, result.redone_seconds) == (10, 10, 0)


def test_peer_ratios_say_how_much_slower_each_rank_is_than_the_median_of_its_peers():
    times = _times({0: 1.0, 1: 1.0, 2: 3.0}, steps=range(20))
    ratios = peer_ratios(times)
    assert ratios[2] == pytest.approx(3.0) and ratios[0] == pytest.approx(0.5)  # peers 1.0 and 3.0: median 2.0
    assert peer_ratios({0: {1: 1.0}}) == {0: None}
    assert peer_ratios({0: {1: 1.0}, 1: {2: 1.0}}) == {0: None, 1: None}  # no common step


def test_goodput_of_nothing_and_of_a_clean_run():
    assert goodput([], now=10, gpus=1).ratio is None
    assert goodput([AttemptSpan(started_at=0, ended_at=50, first_step_at=5)], now=60, gpus=1).ratio == 1.0


# -- decisions --

def test_hung_restarts_in_place_with_its_reason():
    decision = decide(Facts(attempt=1, max_restarts=2), AttemptFailed(message="Hung: ...", restart_reason="Hung"))
    assert (decision.kind, decision.reason, decision.attempt) == (RESTART, "Hung", 2)
    assert "from the last checkpoint" in decision.message


def test_a_bad_node_moves_the_gang_through_the_queue():
    decision = decide(Facts(attempt=2, max_restarts=2),
                      AttemptFailed(message="Straggler.", restart_reason="SlowNode", move=True))
    assert (decision.kind, decision.reason, decision.to_status) == (MOVE, "SlowNode", "queued")
    assert "attempt 3 of 3" in decision.message


def test_no_restarts_left_fails_with_the_healing_reason():
    decision = decide(Facts(attempt=3, max_restarts=2), AttemptFailed(message="Hung.", restart_reason="Hung"))
    assert (decision.kind, decision.reason) == (FAIL, "Hung") and "No restarts left" in decision.message


def test_a_rank_that_called_finish_is_not_hung_while_it_shuts_down():
    ranks = [RankActivity(0, step_changed_at=0.0, done=True), RankActivity(1, step_changed_at=0.0)]
    assert hung_ranks(ranks, now=1000, started_at=0, timeout=60) == [1]
