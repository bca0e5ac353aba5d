"""The pure rules of apps/training/health.py and the self-healing decisions of lifecycle.decide."""
import pytest

from apps.training.health import (
    AttemptSpan,
    RankActivity,
    StragglerDetector,
    StragglerRule,
    attempt_losses,
    detect_stragglers,
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
