"""The autoscaler's decision is a pure function of a metrics window (apps/deployments/autoscaler.py),
property-tested: never outside [min, max], no flapping under constant load, panic only scales up,
a held request brings a deployment back from zero."""
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.deployments.autoscaler import Policy, Sample, State, concurrency, decide

INTERVAL = 2.0  # seconds between a gateway's samples


def policies():
    return st.builds(
        lambda low, span, target: Policy(min_replicas=low, max_replicas=low + span, target=target),
        st.integers(0, 5), st.integers(0, 20), st.floats(0.5, 50),
    )


@settings(max_examples=300, deadline=None)
@given(policy=policies(), current=st.integers(0, 40), held=st.integers(0, 5),
       values=st.lists(st.tuples(st.floats(-10, 120), st.floats(0, 1000, allow_nan=False), st.sampled_from("ab")),
                       max_size=40),
       panic_until=st.none() | st.floats(0, 200), peak=st.integers(0, 50))
def test_desired_is_always_within_min_and_max(policy, current, held, values, panic_until, peak):
    samples = [Sample(time=t, source=src, value=v) for t, v, src in values]
    decision = decide(policy, now=100.0, current=current, samples=samples, held=held,
                      state=State(panic_until=panic_until, panic_peak=peak))
    assert policy.min_replicas <= decision.desired <= policy.max_replicas


def _run(policy, load, *, seconds, current, state=State(), start=0.0):
    """Feed a constant average concurrency `load` for `seconds`, applying each decision at once."""
    samples, desired = [], []
    now = start
    while now < start + seconds:
        now += INTERVAL
        samples.append(Sample(time=now, source="gw", value=load))
        samples = [s for s in samples if s.time > now - policy.stable_window]
        decision = decide(policy, now=now, current=current, samples=samples, state=state)
        state, current = decision.state, decision.desired
        desired.append(current)
    return desired, state


@settings(max_examples=200, deadline=None)
@given(load=st.floats(0.1, 200), target=st.floats(1, 20), start=st.integers(1, 30), high=st.integers(1, 40))
def test_no_flapping_under_constant_load(load, target, start, high):
    policy = Policy(min_replicas=1, max_replicas=high, target=target)
    desired, _ = _run(policy, load, seconds=600, current=min(start, high))
    settled = desired[len(desired) // 2:]  # after five minutes of the same load
    assert len(set(settled)) == 1, settled
    assert settled[0] == min(max(math.ceil(load / target - 1e-9), 1), high)
    changes = sum(1 for a, b in zip(desired, desired[1:], strict=False) if a != b)
    assert changes <= 8  # converges monotonically in a few steps, never oscillates


@settings(max_examples=200, deadline=None)
@given(current=st.integers(1, 10), spike=st.floats(0, 500), target=st.floats(1, 10))
def test_panic_never_scales_down(current, spike, target):
    policy = Policy(min_replicas=1, max_replicas=100, target=target)
    state = State(panic_until=150.0, panic_peak=current)
    decision = decide(policy, now=100.0, current=current, state=state,
                      samples=[Sample(time=99.0, source="gw", value=spike)])
    assert decision.panicking and decision.desired >= current


def test_a_burst_panics_up_fast_then_the_stable_window_brings_it_down_slowly():
    policy = Policy(min_replicas=1, max_replicas=20, target=10)
    steady = [Sample(time=float(t), source="gw", value=10.0) for t in range(2, 60, 2)]
    calm = decide(policy, now=60.0, current=1, samples=steady)
    assert calm.desired == 1 and not calm.panicking
    burst = steady + [Sample(time=62.0, source="gw", value=80.0)]
    panic = decide(policy, now=62.0, current=1, samples=burst, state=calm.state)
    assert panic.panicking and panic.desired == 5  # the 6 s window (samples at 58 and 62 s): 45 in flight / 10
    # The burst is over but the panic holds for a stable window: no scale-down.
    after = decide(policy, now=80.0, current=5, samples=burst + [Sample(time=80.0, source="gw", value=10.0)],
                   state=panic.state)
    assert after.panicking and after.desired == 5
    # Once the panic is over, down by at most half per decision.
    later = decide(policy, now=130.0, current=5, samples=[Sample(time=130.0, source="gw", value=10.0)],
                   state=after.state)
    assert not later.panicking and later.desired == 3


def test_scale_to_zero_after_a_quiet_stable_window_and_back_on_a_held_request():
    policy = Policy(min_replicas=0, max_replicas=3, target=5)
    busy = decide(policy, now=10.0, current=1, samples=[Sample(time=10.0, source="gw", value=1.0)])
    assert busy.desired == 1
    quiet = decide(policy, now=40.0, current=1, samples=[Sample(time=40.0, source="gw", value=0.0)], state=busy.state)
    assert quiet.desired == 1  # not a whole stable window without requests yet
    idle = decide(policy, now=71.0, current=1, samples=[Sample(time=71.0, source="gw", value=0.0)], state=quiet.state)
    assert idle.desired == 0
    cold = decide(policy, now=80.0, current=0, samples=[], state=idle.state, held=1)
    assert cold.desired == 1


def test_concurrency_sums_sources_and_ignores_samples_out_of_the_window():
    samples = [Sample(1.0, "a", 4.0), Sample(3.0, "a", 2.0), Sample(3.0, "b", 5.0), Sample(-70.0, "b", 100.0)]
    assert concurrency(samples, now=4.0, window=60.0) == 3.0 + 5.0
    assert concurrency(samples, now=4.0, window=2.0) == 2.0 + 5.0


def test_a_replica_panics_at_twice_its_target_not_as_soon_as_a_window_rounds_up_to_two():
    """The panic threshold compares the panic window's concurrency with what the running replicas
    carry (before rounding): one replica at target 1 with 1.3 in flight over the panic window is
    not a panic (the stable window decides, and its mean is under the target); with 2.0 it is."""
    policy = Policy(min_replicas=1, max_replicas=4, target=1.0, stable_window=6, panic_window=1)
    quiet = [Sample(time=float(t), source="gw", value=0.4) for t in (96, 98)]
    over = decide(policy, now=100.0, current=1, samples=[*quiet, Sample(time=100.0, source="gw", value=1.3)])
    assert not over.panicking and over.desired == 1  # stable: (0.4 + 0.4 + 1.3) / 3 = 0.7 in flight
    burst = decide(policy, now=100.0, current=1, samples=[*quiet, Sample(time=100.0, source="gw", value=2.0)])
    assert burst.panicking and burst.desired == 2
    # Four replicas: a panic from 8 in flight on (2x their 4), not from 4.1 (which rounds to 5 > 4).
    four = [Sample(time=float(t), source="gw", value=4.0) for t in (96, 98)]
    assert not decide(policy, now=100.0, current=4, samples=[*four, Sample(time=100.0, source="gw", value=7.9)]
                      ).panicking
    assert decide(policy, now=100.0, current=4, samples=[*four, Sample(time=100.0, source="gw", value=8.0)]).panicking
