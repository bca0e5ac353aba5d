"""Writes of the training app: checkpoints reported by the SDK, each rank's progress."""
from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from apps.core.errors import ServiceError
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record

from .health import KEPT_STEP_TIMES
from .models import AttemptProgress, Checkpoint, ReplicaProgress

RECENT_STEPS = KEPT_STEP_TIMES  # step times kept per rank: the straggler detector's window is shorter


def _size(num: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if num < 1024 or unit == "GiB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return f"{num} B"


def checkpoint_record(
    *, workload: Workload, attempt: int, replica: int, step: int, size_bytes: int, save_seconds: float,
    blocking_seconds: float, name: str = "", sha256: str = "", two_stage: bool = False,
) -> Checkpoint:
    """Store a checkpoint the SDK persisted and put it on the workload's timeline (an event)."""
    with transaction.atomic():
        checkpoint = Checkpoint.objects.create(
            workload=workload, attempt=attempt, replica=replica, step=step, name=name[:64], size_bytes=size_bytes,
            save_seconds=save_seconds, blocking_seconds=blocking_seconds, two_stage=two_stage, sha256=sha256[:64],
        )
        how = f"two-stage, training blocked {blocking_seconds:.2f}s" if two_stage else "blocking"
        workload_event_record(
            workload=workload, reason="CheckpointSaved",
            message=f"Checkpoint at step {step} ({_size(size_bytes)}) saved by replica {replica} of attempt "
                    f"{attempt} in {save_seconds:.2f}s ({how}).",
        )
    return checkpoint


def replica_progress_record(
    *, workload_id: int, attempt: int, replica: int, step: int, steps: list[tuple[int, float]],
    at: datetime | None = None, done: bool = False,
) -> ReplicaProgress | None:
    """Keep the last step of one rank and its recent step times (`steps`: [(step, seconds)]).
    A report from an older attempt than the one recorded is ignored (a slow sender of a killed
    rank must not make the new attempt look alive)."""
    if replica < 0 or step < 0:
        raise ServiceError("progress: replica and step must be >= 0.")
    now = at or timezone.now()
    with transaction.atomic():
        row = ReplicaProgress.objects.select_for_update().filter(workload_id=workload_id, replica=replica).first()
        if row is None or attempt > row.attempt:  # a rank's first report in this attempt
            if not Workload.objects.filter(pk=workload_id).exists():
                return None
            AttemptProgress.objects.get_or_create(workload_id=workload_id, attempt=attempt,
                                                  defaults={"first_step": step, "first_step_at": now})
        if row is None:
            return ReplicaProgress.objects.create(
                workload_id=workload_id, replica=replica, attempt=attempt, step=step,
                step_seconds=steps[-1][1] if steps else None, recent=[list(s) for s in steps][-RECENT_STEPS:],
                first_reported_at=now, step_changed_at=now, reported_at=now, done=done,
            )
        if attempt < row.attempt:
            return row
        if attempt > row.attempt:  # a new attempt: its own history
            row.attempt, row.recent, row.first_reported_at, row.step_changed_at = attempt, [], now, now
            row.done = False
        elif step != row.step:
            row.step_changed_at = now
        row.step = step
        if steps:
            row.recent = (row.recent + [list(s) for s in steps])[-RECENT_STEPS:]
            row.step_seconds = steps[-1][1]
        row.reported_at = now
        row.done = row.done or done
        row.save()
        return row
