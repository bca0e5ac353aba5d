"""When is a notebook idle enough to stop? A pure function over plain data (no Django, no I/O), so
the culler, the API and the tests agree.

A notebook counts as active at a moment when, at that moment:
- one of its kernels is busy (executing), or
- one of its GPUs (where Cairn has telemetry for them) is at or above the threshold, or
- a kernel or terminal shows activity (Jupyter's `last_activity` of each kernel and terminal:
  messages to and from it; not the dashboard polling the server's REST API, which an open
  browser tab does forever), or for VS Code its last heartbeat.

It is idle since the latest of: those moments, and its start. Idle for `idle_timeout` seconds (0:
never) with no busy kernel and no GPU over the threshold right now, it is stopped.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Observation:
    """What the culler saw of one notebook in one pass."""

    reached: bool  # its IDE answered (if not, nothing is decided: it may be starting)
    busy_kernels: int = 0
    kernels: int = 0
    connections: int = 0
    last_activity: datetime | None = None  # latest activity of its kernels and terminals (or heartbeat)
    gpu_utilisation: float | None = None  # percent, the highest of its GPUs; None: no telemetry


@dataclass(frozen=True)
class Verdict:
    active_at: datetime  # the last moment it counted as active (or its start)
    idle_seconds: float
    deadline: datetime | None  # when it will be stopped if nothing happens; None: never
    cull: bool
    why: str  # for people: what kept it alive, or why it is stopped


def cull_verdict(*, observation: Observation, now: datetime, started_at: datetime, previous_active_at: datetime | None,
                 idle_timeout: int, gpu_threshold: float) -> Verdict:
    active_at = max(t for t in (started_at, previous_active_at, observation.last_activity) if t is not None)
    kept = ""
    if observation.reached and observation.busy_kernels:
        kept = f"{observation.busy_kernels} kernel(s) busy"
    elif observation.gpu_utilisation is not None and observation.gpu_utilisation >= gpu_threshold:
        kept = f"GPU utilisation {observation.gpu_utilisation:.1f}% (at or above {gpu_threshold:g}%)"
    if kept:
        active_at = now
    active_at = min(active_at, now)
    idle = max(0.0, (now - active_at).total_seconds())
    if idle_timeout <= 0:
        return Verdict(active_at, idle, None, False, "Idle reclaim is off for this notebook (idle_timeout 0).")
    deadline = active_at + timedelta(seconds=idle_timeout)
    if kept:
        return Verdict(active_at, idle, deadline, False, f"Active: {kept}.")
    if not observation.reached:
        return Verdict(active_at, idle, deadline, False, "Its IDE did not answer; nothing decided.")
    if idle < idle_timeout:
        return Verdict(active_at, idle, deadline, False, f"Idle for {_duration(idle)} of {_duration(idle_timeout)}.")
    gpu = ("no GPU telemetry" if observation.gpu_utilisation is None
           else f"GPU utilisation {observation.gpu_utilisation:.1f}% under {gpu_threshold:g}%")
    return Verdict(active_at, idle, deadline, True,
                   f"Idle for {_duration(idle)} (idle_timeout {_duration(idle_timeout)}): no busy kernel, {gpu}.")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m"
