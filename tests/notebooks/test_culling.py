"""The idle culler's decision (apps/notebooks/culling.py): a pure function, tested on plain data."""
from datetime import UTC, datetime, timedelta

from apps.notebooks.culling import Observation, cull_verdict

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
HOUR = 3600


def verdict(observation, *, minutes: float, timeout: int = HOUR, previous=None, threshold: float = 5.0):
    return cull_verdict(observation=observation, now=T0 + timedelta(minutes=minutes), started_at=T0,
                        previous_active_at=previous, idle_timeout=timeout, gpu_threshold=threshold)


def test_idle_past_its_timeout_is_culled_and_says_why():
    v = verdict(Observation(reached=True, kernels=1), minutes=61)
    assert v.cull and v.idle_seconds == 61 * 60 and v.deadline == T0 + timedelta(hours=1)
    assert "Idle for 1h 01m" in v.why and "no busy kernel" in v.why and "no GPU telemetry" in v.why


def test_not_yet_idle_long_enough_is_kept_with_its_deadline():
    v = verdict(Observation(reached=True), minutes=59)
    assert not v.cull and v.deadline == T0 + timedelta(hours=1)


def test_kernel_activity_moves_the_deadline():
    last = T0 + timedelta(minutes=30)
    v = verdict(Observation(reached=True, last_activity=last), minutes=61)
    assert not v.cull and v.active_at == last and v.deadline == last + timedelta(hours=1)


def test_a_busy_kernel_keeps_it_alive_however_long_ago_the_last_message():
    v = verdict(Observation(reached=True, busy_kernels=1, kernels=1), minutes=600)
    assert not v.cull and v.idle_seconds == 0 and "1 kernel(s) busy" in v.why


def test_a_gpu_at_or_above_the_threshold_keeps_it_alive():
    assert not verdict(Observation(reached=True, gpu_utilisation=5.0), minutes=600).cull
    assert not verdict(Observation(reached=True, gpu_utilisation=80.0), minutes=600).cull
    under = verdict(Observation(reached=True, gpu_utilisation=4.9), minutes=61)
    assert under.cull and "GPU utilisation 4.9% under 5%" in under.why


def test_remembered_activity_counts_after_the_gpu_goes_quiet():
    busy_at = T0 + timedelta(minutes=50)
    v = verdict(Observation(reached=True, gpu_utilisation=0.0), minutes=61, previous=busy_at)
    assert not v.cull and v.active_at == busy_at


def test_zero_means_never():
    v = verdict(Observation(reached=True), minutes=10_000, timeout=0)
    assert not v.cull and v.deadline is None


def test_an_ide_that_does_not_answer_is_not_culled():
    v = verdict(Observation(reached=False), minutes=600)
    assert not v.cull and "did not answer" in v.why


def test_activity_reported_in_the_future_counts_as_now():
    v = verdict(Observation(reached=True, last_activity=T0 + timedelta(hours=5)), minutes=10)
    assert v.active_at == T0 + timedelta(minutes=10) and v.idle_seconds == 0
