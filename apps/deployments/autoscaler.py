"""Cairn's autoscaler for deployments: desired replicas as a pure function of a metrics window.

Modelled on Knative's KPA. The input is the gateway's `serve.concurrency` samples of the
deployment (average requests in flight over each metrics interval, one series per gateway
process: apps/deployments/metrics.py). Over the **stable window** (default 60 s) and the **panic
window** (default 6 s) the deployment's concurrency is the sum over gateway processes of the mean
of their samples in the window; desired = ceil(concurrency / target per replica).

- Normally the stable window decides: slow to react, so it does not flap on noise.
- When the panic window's concurrency is at least `panic_threshold` (default 2x) times what the
  running replicas are meant to carry (replicas x target, compared before rounding up to whole
  replicas), the autoscaler panics for a stable window's time: it follows the panic window up,
  and never scales down while panicking. (Rounding first would make one replica panic on any
  load above its target: ceil(1.01) is already 2x one replica.)
- Scale-down is at most by `max_scale_down_rate` (default 2x) per decision.
- The result is clamped to [min_replicas, max_replicas]. With scale to zero (min_replicas 0), it
  reaches 0 only after a whole stable window without any request; requests held at the gateway
  during a cold start count as demand (`held`), so a deployment at zero comes back at once.

`decide()` is pure: plain data in, plain data out (tests/deployments/test_autoscaler.py drives it
with hypothesis). The service that applies it is `deployment_autoscale` (services.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

DEFAULT_TARGET = 10.0  # requests in flight per replica
DEFAULT_STABLE_WINDOW = 60.0
DEFAULT_PANIC_WINDOW = 6.0
DEFAULT_PANIC_THRESHOLD = 2.0
DEFAULT_MAX_SCALE_DOWN_RATE = 2.0


@dataclass(frozen=True)
class Policy:
    min_replicas: int = 1
    max_replicas: int = 1
    target: float = DEFAULT_TARGET
    stable_window: float = DEFAULT_STABLE_WINDOW
    panic_window: float = DEFAULT_PANIC_WINDOW
    panic_threshold: float = DEFAULT_PANIC_THRESHOLD
    max_scale_down_rate: float = DEFAULT_MAX_SCALE_DOWN_RATE

    @property
    def enabled(self) -> bool:
        return self.max_replicas > self.min_replicas or self.min_replicas == 0


@dataclass(frozen=True)
class Sample:
    time: float  # seconds (any epoch, the same as `now`)
    source: str  # the gateway process that measured it
    value: float  # average requests in flight over its interval


@dataclass(frozen=True)
class State:
    """What the autoscaler remembers between decisions."""
    panic_until: float | None = None  # panicking until then
    panic_peak: int = 0  # the highest desired count seen while panicking
    last_demand: float | None = None  # when a request was last seen (scale to zero waits a stable window)


@dataclass(frozen=True)
class Decision:
    desired: int
    state: State
    stable_concurrency: float
    panic_concurrency: float
    panicking: bool
    reason: str


def concurrency(samples: Iterable[Sample], *, now: float, window: float) -> float:
    """Sum over sources of the mean of their samples in (now - window, now]."""
    per_source: dict[str, list[float]] = {}
    for sample in samples:
        if now - window < sample.time <= now and math.isfinite(sample.value) and sample.value >= 0:
            per_source.setdefault(sample.source, []).append(sample.value)
    return sum(sum(values) / len(values) for values in per_source.values())


def decide(policy: Policy, *, now: float, current: int, samples: Iterable[Sample], state: State = State(),
           held: int = 0) -> Decision:
    """Desired replicas for a deployment running `current` replicas (pure)."""
    samples = list(samples)
    low, high = max(0, policy.min_replicas), max(policy.min_replicas, policy.max_replicas, 0)
    target = policy.target if policy.target > 0 and math.isfinite(policy.target) else DEFAULT_TARGET
    stable = concurrency(samples, now=now, window=policy.stable_window)
    panic = concurrency(samples, now=now, window=policy.panic_window)
    # When a request was last seen: the newest sample with requests in it, or now if some are held.
    seen = [s.time for s in samples if s.value > 0 and s.time <= now]
    if held > 0:
        seen.append(now)
    last_demand = max([t for t in (state.last_demand, *seen) if t is not None], default=None)
    want_stable = math.ceil(stable / target - 1e-9)
    want_panic = math.ceil(panic / target - 1e-9)
    if held > 0:
        want_panic = max(want_panic, 1)
        want_stable = max(want_stable, 1)

    panicking = state.panic_until is not None and now < state.panic_until
    # The ratio before rounding, as Knative's KPA compares it: with one replica and a 2x threshold,
    # a panic needs twice the target in flight, not just over it.
    if (current > 0 and panic / target >= policy.panic_threshold * current) or (current == 0 and want_panic > 0):
        panicking = True
        panic_until = now + policy.stable_window
    else:
        panic_until = state.panic_until if panicking else None
    if panicking:
        peak = max(state.panic_peak if state.panic_until is not None else 0, want_panic, current)
        desired, reason = peak, f"panic: {panic:.2f} in flight over {policy.panic_window:g}s"
    else:
        peak = 0
        desired, reason = want_stable, f"stable: {stable:.2f} in flight over {policy.stable_window:g}s"
        if current > 0 and policy.max_scale_down_rate > 1:
            desired = max(desired, math.ceil(current / policy.max_scale_down_rate))
        if want_stable == 0:  # to zero only after a whole stable window without a request
            idle = last_demand is None or now - last_demand >= policy.stable_window
            desired = 0 if idle else max(desired, 1)
            if idle:
                reason = f"no request for {policy.stable_window:g}s"
    desired = min(max(desired, low), high)
    return Decision(desired=desired, state=replace(state, panic_until=panic_until if panicking else None,
                                                   panic_peak=peak if panicking else 0, last_demand=last_demand),
                    stable_concurrency=stable, panic_concurrency=panic, panicking=panicking, reason=reason)
