"""Reads of the training app."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import BooleanField, ExpressionWrapper, Q
from django.utils import timezone

from apps.workloads.choices import TERMINAL, WorkloadStatus
from apps.workloads.kinds import kind_spec
from apps.workloads.models import Workload
from apps.workloads.runtime import Runtime

from .health import AttemptSpan, Goodput, attempt_losses, goodput, hang_timeout_of, peer_ratios
from .models import AttemptProgress, Checkpoint, ReplicaProgress


def progress_of_attempt(*, workload_id: int, attempt: int) -> list[ReplicaProgress]:
    """The progress rows of the ranks that reported in this attempt, by replica."""
    return list(ReplicaProgress.objects.filter(workload_id=workload_id, attempt=attempt).order_by("replica"))


def step_times(rows: list[ReplicaProgress]) -> dict[int, dict[int, float]]:
    """replica -> {step: seconds} from the recent step times of each row."""
    return {row.replica: {int(step): float(seconds) for step, seconds in row.recent or []} for row in rows}


# -- goodput ---------------------------------------------------------------------------------------

RESTART_REASONS = frozenset({"Restarting", "Hung"})  # in place: attempt n ended, n+1 started
MOVE_REASONS = frozenset({"SlowNode", "NodeUnhealthy", "Rescheduled"})  # requeued off a bad node


@dataclass(frozen=True)
class AttemptEnd:
    """Why an attempt ended, from the event that ended it (None while it runs)."""

    cause: str
    message: str
    at: float
    restarted: bool  # another attempt follows (in place or requeued), not the end of the job


def _attempt_trail(workload: Workload) -> list[tuple[AttemptSpan, AttemptEnd | None]]:
    """The attempts of a training job, read from its event trail, its checkpoints and the first
    step each attempt reported, each with the event that ended it."""
    first_steps = {row.attempt: row.first_step_at.timestamp()
                   for row in AttemptProgress.objects.filter(workload=workload)}
    last_checkpoints: dict[int, float] = {}
    for attempt, created in Checkpoint.objects.filter(workload=workload).values_list("attempt", "created_at"):
        last_checkpoints[attempt] = max(last_checkpoints.get(attempt, 0.0), created.timestamp())
    timeout = hang_timeout_of(workload.spec)
    spans: list[dict] = []

    def close(at: float, failed: bool, reason: str, message: str, restarted: bool = True) -> None:
        if spans and spans[-1]["ended_at"] is None:
            spans[-1].update(ended_at=at, failed=failed,
                             end=AttemptEnd(cause=reason, message=message, at=at, restarted=restarted))

    def open_(at: float) -> None:
        spans.append({"started_at": at, "ended_at": None, "failed": False, "hung_at": None, "end": None})

    # A hang is recorded twice under the reason Hung: the diagnosis (with the stacks attached)
    # when it is seen, and the restart once every rank is gone. Only the restart ends the attempt;
    # the diagnosis says since when it was stuck (no step, no output for hang_timeout).
    events = workload.events.filter(
        Q(to_status=WorkloadStatus.RUNNING) | Q(reason__in=RESTART_REASONS, to_status="")
        | Q(from_status=WorkloadStatus.RUNNING) | Q(from_status=WorkloadStatus.STOPPING)
    ).annotate(diagnosis=ExpressionWrapper(~Q(attachment=""), output_field=BooleanField())).order_by(
        "created_at", "id").values_list("reason", "to_status", "created_at", "message", "diagnosis")
    for reason, to_status, created, message, diagnosis in events:
        at = created.timestamp()
        if to_status == WorkloadStatus.RUNNING:
            open_(at)
        elif not to_status and reason in RESTART_REASONS:
            if diagnosis:
                if spans and spans[-1]["ended_at"] is None:
                    spans[-1]["hung_at"] = at - timeout
            else:
                close(at, failed=True, reason=reason, message=message)
                open_(at)
        elif to_status == WorkloadStatus.QUEUED:
            close(at, failed=reason in MOVE_REASONS, reason=reason, message=message)
        elif to_status in TERMINAL:
            close(at, failed=False, reason=reason, message=message, restarted=False)
    out = []
    for number, span in enumerate(spans, start=1):
        out.append((AttemptSpan(started_at=span["started_at"], ended_at=span["ended_at"], failed=span["failed"],
                                first_step_at=first_steps.get(number), last_checkpoint_at=last_checkpoints.get(number),
                                hung_at=span["hung_at"]), span["end"]))
    return out


def attempt_spans(workload: Workload) -> list[AttemptSpan]:
    """The attempts of a training job (see `_attempt_trail`)."""
    return [span for span, _ in _attempt_trail(workload)]


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


# -- the workload page's resilience panel -------------------------------------------------------------

CHECKPOINTS_SHOWN = 50


def workload_resilience(workload: Workload, *, now: datetime | None = None) -> dict:
    """Goodput, checkpoints, each rank's last progress and the restarts of one workload, for
    `GET .../workloads/<id>/resilience/`. Any kind: one that does not run to completion (a
    notebook, a deployment) has no goodput, and a job without the SDK no ranks or checkpoints."""
    now_ts = (now or timezone.now()).timestamp()
    trail = _attempt_trail(workload) if kind_spec(workload.kind).runs_to_completion else []
    spans = [span for span, _ in trail]
    gpus = workload.replicas * workload.gpu_milli / 1000
    summary = goodput(spans, now=now_ts, gpus=gpus)
    losses = attempt_losses(spans, now=now_ts)  # in the trail's order, which is by start
    resumed_at = dict(AttemptProgress.objects.filter(workload=workload).values_list("attempt", "first_step"))
    restarts = []
    for index, (_, end) in enumerate(trail):
        if end is None or not end.restarted:
            continue
        follows = index + 1 < len(trail)
        restarts.append({
            "attempt": index + 1, "cause": end.cause, "message": end.message,
            "time": datetime.fromtimestamp(end.at, tz=UTC),
            "lost_seconds": losses[index].lost, "hung_seconds": losses[index].hung,
            "overhead_seconds": losses[index + 1].overhead if follows else 0.0,
            "resumed_at_step": resumed_at.get(index + 2) if follows else None,
        })
    rows = list(ReplicaProgress.objects.filter(workload=workload).order_by("replica"))
    current = [row for row in rows if row.attempt == workload.attempt]
    ratios = peer_ratios(step_times(current)) if len(current) >= 2 else {}
    runtime = Runtime.of(workload)
    flagged = runtime.stragglers
    ranks = [{
        "replica": row.replica, "attempt": row.attempt, "step": row.step, "step_seconds": row.step_seconds,
        "step_changed_at": row.step_changed_at, "reported_at": row.reported_at,
        "straggler": row.attempt == workload.attempt and row.replica in flagged,
        "ratio_to_peer_median": ratios.get(row.replica) if row.attempt == workload.attempt else None,
    } for row in rows]
    checkpoints = list(Checkpoint.objects.filter(workload=workload).order_by("-created_at", "-id")
                       [:CHECKPOINTS_SHOWN])[::-1]
    spec = workload.spec or {}
    return {
        "goodput": summary, "checkpoints": checkpoints, "ranks": ranks, "restarts": restarts,
        "stragglers": sorted(flagged),
        "slow_groups": runtime.slow_groups,
        "slowdown": runtime.slowdown,
        "hang_timeout_seconds": int(hang_timeout_of(spec)),
        "straggler_policy": spec.get("straggler_policy") or "alert",
    }
