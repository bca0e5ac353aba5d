"""Reads of the training app."""
from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from apps.workloads.choices import TERMINAL, WorkloadStatus
from apps.workloads.models import Workload

from .health import AttemptSpan, Goodput, goodput
from .models import AttemptProgress, Checkpoint, ReplicaProgress


def progress_of_attempt(*, workload_id: int, attempt: int) -> list[ReplicaProgress]:
    """The progress rows of the ranks that reported in this attempt, by replica."""
    return list(ReplicaProgress.objects.filter(workload_id=workload_id, attempt=attempt).order_by("replica"))


def step_times(rows: list[ReplicaProgress]) -> dict[int, dict[int, float]]:
    """replica -> {step: seconds} from the recent step times of each row."""
    return {row.replica: {int(step): float(seconds) for step, seconds in row.recent or []} for row in rows}


def checkpoints_of(*, workload_id: int) -> list[Checkpoint]:
    return list(Checkpoint.objects.filter(workload_id=workload_id).order_by("created_at", "id"))


# -- goodput ---------------------------------------------------------------------------------------

RESTART_REASONS = frozenset({"Restarting", "Hung"})  # in place: attempt n ended, n+1 started
MOVE_REASONS = frozenset({"SlowNode", "NodeUnhealthy", "Rescheduled"})  # requeued off a bad node


def attempt_spans(workload: Workload) -> list[AttemptSpan]:
    """The attempts of a training job, read from its event trail, its checkpoints and the first
    step each attempt reported."""
    first_steps = {row.attempt: row.first_step_at.timestamp()
                   for row in AttemptProgress.objects.filter(workload=workload)}
    last_checkpoints: dict[int, float] = {}
    for attempt, created in Checkpoint.objects.filter(workload=workload).values_list("attempt", "created_at"):
        last_checkpoints[attempt] = max(last_checkpoints.get(attempt, 0.0), created.timestamp())
    spans: list[dict] = []

    def close(at: float, failed: bool) -> None:
        if spans and spans[-1]["ended_at"] is None:
            spans[-1].update(ended_at=at, failed=failed)

    def open_(at: float) -> None:
        spans.append({"started_at": at, "ended_at": None, "failed": False})

    events = workload.events.filter(
        Q(to_status=WorkloadStatus.RUNNING) | Q(reason__in=RESTART_REASONS, to_status="")
        | Q(from_status=WorkloadStatus.RUNNING) | Q(from_status=WorkloadStatus.STOPPING)
    ).order_by("created_at", "id").values_list("reason", "to_status", "created_at")
    for reason, to_status, created in events:
        at = created.timestamp()
        if to_status == WorkloadStatus.RUNNING:
            open_(at)
        elif not to_status and reason in RESTART_REASONS:
            close(at, failed=True)
            open_(at)
        elif to_status == WorkloadStatus.QUEUED:
            close(at, failed=reason in MOVE_REASONS)
        elif to_status in TERMINAL:
            close(at, failed=False)
    out = []
    for number, span in enumerate(spans, start=1):
        out.append(AttemptSpan(started_at=span["started_at"], ended_at=span["ended_at"], failed=span["failed"],
                               first_step_at=first_steps.get(number), last_checkpoint_at=last_checkpoints.get(number)))
    return out


def workload_goodput(workload: Workload, *, now: datetime | None = None) -> Goodput:
    gpus = workload.replicas * workload.gpu_milli / 1000
    return goodput(attempt_spans(workload), now=(now or timezone.now()).timestamp(), gpus=gpus)


def project_goodput(*, project_id: int, now: datetime | None = None) -> dict:
    """The training jobs of a project, summed: wall and productive hours, hours and GPU-hours lost."""
    now = now or timezone.now()
    jobs = Workload.objects.filter(project_id=project_id, kind="training").exclude(started_at=None)
    totals = {"jobs": 0, "wall_hours": 0.0, "productive_hours": 0.0, "lost_hours": 0.0, "overhead_hours": 0.0,
              "gpu_hours_lost": 0.0}
    for workload in jobs.prefetch_related(None):
        result = workload_goodput(workload, now=now)
        totals["jobs"] += 1
        totals["wall_hours"] += result.wall_seconds / 3600
        totals["productive_hours"] += result.productive_seconds / 3600
        totals["lost_hours"] += result.lost_seconds / 3600
        totals["overhead_hours"] += result.overhead_seconds / 3600
        totals["gpu_hours_lost"] += result.gpu_hours_lost
    totals["goodput"] = totals["productive_hours"] / totals["wall_hours"] if totals["wall_hours"] > 0 else None
    return totals
