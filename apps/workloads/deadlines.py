"""Run-time limits (`Workload.max_runtime_seconds`, like Slurm's --time or a Job's
activeDeadlineSeconds): when the current run started, when it must end, how long is left.

Pure functions over a workload row (no queries), shared by the scheduler's snapshot, the local
reconciler and the Kubernetes manifests, so all three agree on one clock:

- The clock starts at `started_at`, when the backend launched the replicas after the workload's
  latest admission (not `admitted_at`: the time a dispatch takes, or a requeued workload waits for
  its previous replicas to exit, is not the user's run time). Until then the run has no deadline.
- Where the cluster has an admission authority of its own (Kueue, Volcano), the backend's launch
  is a reservation: it marks the run `CLOCK_AWAITS_PODS` in `runtime`, and the clock starts when
  the first replica runs (`workload_run_clock_start`: `started_at` moved there, the GPU-hour
  charge too). Until then the run has no deadline, however long the cluster's queue holds it.
- Restarts (`max_restarts`) happen inside the same admission and keep `started_at`: the limit
  counts in total over them, so a crash loop cannot hold the GPUs longer than the limit the
  scheduler planned (reservations) and charged (GPU-hour budgets) for.
- A workload preempted and requeued gets its full limit again from its new start: it releases its
  resources, and its next admission is planned and charged again as a new run of up to the limit;
  the preemption was not its doing, and resuming from a checkpoint needs time of its own.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

# CLOCK_AWAITS_PODS, in `runtime`: launched, but the clock waits for the first replica to run.
from .runtime import CLOCK_AWAITS_PODS as CLOCK_AWAITS_PODS
from .runtime import Runtime

if TYPE_CHECKING:
    from .models import Workload

MIN_RUNTIME_LIMIT_SECONDS = 60
MAX_RUNTIME_LIMIT_SECONDS = 30 * 24 * 3600
REASON = "DeadlineExceeded"  # status_reason and event reason (Kubernetes' Job condition reason)


def run_started_at(workload: Workload) -> datetime | None:
    """When the current run began; None while the latest admission has not been launched yet
    (`started_at` is then that of a run before a requeue, or unset), or launched into a cluster's
    queue whose replicas have not run yet (CLOCK_AWAITS_PODS)."""
    started = workload.started_at
    if Runtime.of(workload).clock_awaits_pods:
        return None
    if started is None or (workload.admitted_at is not None and started < workload.admitted_at):
        return None
    return started


def run_deadline(workload: Workload) -> datetime | None:
    """When the current run must have ended (None: no limit, or not started yet)."""
    started = run_started_at(workload)
    if started is None or not workload.max_runtime_seconds:
        return None
    return started + timedelta(seconds=workload.max_runtime_seconds)


def expected_end(workload: Workload) -> datetime | None:
    """When an admitted or running workload releases its resources at the latest, for the
    scheduler's estimates: its deadline, or, not launched yet, its admission plus the limit
    (dispatch follows admission within a scheduler interval or so)."""
    if not workload.max_runtime_seconds:
        return None
    deadline = run_deadline(workload)
    if deadline is not None:
        return deadline
    if workload.admitted_at is None:
        return None
    return workload.admitted_at + timedelta(seconds=workload.max_runtime_seconds)


def seconds_left(workload: Workload, *, now: datetime) -> int | None:
    """Whole seconds the current run may still use (the full limit before it started; 0 once
    the deadline has passed); None without a limit."""
    if not workload.max_runtime_seconds:
        return None
    deadline = run_deadline(workload)
    if deadline is None:
        return workload.max_runtime_seconds
    return max(0, math.ceil((deadline - now).total_seconds()))


def format_duration(seconds: float | None) -> str:
    """7200 -> '2h', 5400 -> '1h30m', 90 -> '1m30s', 2592000 -> '30d'; None -> 'no limit'."""
    if seconds is None:
        return "no limit"
    seconds = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)
