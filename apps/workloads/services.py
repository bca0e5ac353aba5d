"""Writes to workloads. Every status change goes through `workload_transition`."""
import logging
from collections.abc import Callable
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.clusters.models import ResourcePool
from apps.core.errors import ConflictError, ServiceError
from apps.core.outbox import outbox_enqueue
from apps.core.realtime import project_group, publish
from apps.projects.models import Project
from apps.quotas.services import usage_close, usage_open, usage_start_later
from apps.storage.services import storage_spec_check

from .choices import ACTIVE, TERMINAL, EventType, StopCause, WorkloadStatus, can_transition
from .deadlines import CLOCK_AWAITS_PODS, format_duration, run_deadline, run_started_at
from .deadlines import REASON as DEADLINE_REASON
from .models import Workload, WorkloadEvent
from .runtime import Runtime

logger = logging.getLogger(__name__)
S = WorkloadStatus

# Apps above workloads that keep state per attempt register a handler here at AppConfig.ready():
# handler(workload=, workload_status=) runs inside the transition's transaction when an attempt
# ends (the workload leaves an active status for a terminal one or is requeued). Tracking closes
# the attempt's open runs with it (workloads sits below tracking and may not import it).
attempt_ended_handlers: list[Callable[..., object]] = []

# Condition type set to True when entering each status (Kubernetes-style).
_CONDITION_FOR_STATUS = {
    S.QUEUED: "Queued",
    S.ADMITTED: "Admitted",
    S.RUNNING: "Running",
    S.STOPPING: "Stopping",
    S.SUCCEEDED: "Finished",
    S.FAILED: "Finished",
    S.STOPPED: "Finished",
    S.LOST: "Finished",
}


def _updated_conditions(conditions: list[dict], *, status: str, reason: str, message: str, now: datetime,
                       attempt: int = 1) -> list[dict]:
    """Set the condition for `status` to True and the others (except history) to False. A condition
    that flips to False takes the reason and message of the transition that ended it (its old
    message, e.g. "Waiting for the scheduler.", would no longer be true).

    Each condition carries the attempt it describes (`attempt`, and Kubernetes' name for it,
    `observedGeneration`): the conditions are those of the current attempt only (a workload
    going back to the queue starts from none, see `conditions_attempt`)."""
    wanted = _CONDITION_FOR_STATUS[status]
    by_type = {c["type"]: dict(c) for c in conditions}
    for ctype, cond in by_type.items():
        if ctype != wanted and cond["status"] == "True" and ctype in ("Queued", "Running", "Stopping"):
            cond.update(status="False", reason=reason, lastTransitionTime=now.isoformat(),
                        message=f"No longer {ctype.lower()}: {status}" + (f" ({message.rstrip('.')})." if message else "."))
        if ctype in _CONDITION_ORDER:  # still true (or false) as of this attempt
            cond.update(attempt=attempt, observedGeneration=attempt)
    current = by_type.get(wanted)
    if current is None or current["status"] != "True" or current.get("reason") != reason:
        by_type[wanted] = {
            "type": wanted,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now.isoformat(),
            "attempt": attempt,
            "observedGeneration": attempt,
        }
    return sorted(by_type.values(),
                  key=lambda c: _CONDITION_ORDER.index(c["type"]) if c["type"] in _CONDITION_ORDER else 99)


_CONDITION_ORDER = ["Queued", "Admitted", "Running", "Stopping", "Finished"]


def conditions_attempt(workload: Workload, *, to_status: str, attempt: int | None = None) -> tuple[list[dict], int]:
    """The conditions a transition of `workload` to `to_status` starts from, and the attempt they
    describe (Kubernetes' convention: a new generation starts from fresh conditions).

    Back in the queue (started again, requeued after a preemption, moved off a bad node), the
    workload waits for attempt n+1: the last attempt's conditions (its `Finished`, its
    `Admitted` time) no longer describe it. Otherwise the attempt is the one being launched
    (`attempt`), or the one the conditions already describe."""
    launched = workload.attempt if attempt is None else attempt
    if to_status == S.QUEUED and workload.status != S.QUEUED:
        return [], launched + 1
    if attempt is not None:
        return workload.conditions or [], max(attempt, 1)
    known = [c["attempt"] for c in workload.conditions or [] if isinstance(c.get("attempt"), int)]
    return workload.conditions or [], max(known) if known else max(launched, 1)


def conditions_restarted(workload: Workload, *, attempt: int, reason: str, message: str) -> list[dict]:
    """The conditions of a workload restarted in place (RUNNING throughout) as attempt `attempt`:
    its admission still holds; Running is set anew for the new attempt."""
    others = [c for c in workload.conditions or [] if c["type"] != "Running"]
    return _updated_conditions(others, status=S.RUNNING, reason=reason, message=message, now=timezone.now(),
                               attempt=attempt)


def workload_event_record(
    *, workload: Workload, reason: str, message: str = "", type: str = EventType.NORMAL,
    from_status: str = "", to_status: str = "", attachment: str = "",
) -> WorkloadEvent:
    event = WorkloadEvent.objects.create(
        workload=workload, reason=reason, message=message[:10000], type=type,
        from_status=from_status, to_status=to_status, attachment=attachment[:1_000_000],
    )
    publish(
        project_group(workload.project_id),
        {
            "type": "workload.event",
            "workload": workload.pk,
            "reason": reason,
            "message": event.message,
            "event_type": type,
            "time": event.created_at.isoformat(),
        },
    )
    return event


def workload_transition(
    *,
    workload_id: int,
    from_statuses: set[str] | frozenset[str] | None = None,
    to_status: str,
    reason: str,
    message: str = "",
    event_type: str = EventType.NORMAL,
    **fields,
) -> Workload | None:
    """Move a workload to `to_status` if it is still in one of `from_statuses`.

    Compare-and-set: the UPDATE only matches while the status is unchanged, so of two racing
    writers exactly one wins; the loser gets None and must treat the new state as the truth.
    Illegal transitions (per TRANSITIONS) raise ConflictError. Extra `fields` are written in
    the same UPDATE.
    """
    with transaction.atomic():
        workload = Workload.objects.filter(pk=workload_id).first()
        if workload is None:
            return None
        current = workload.status
        if from_statuses is not None and current not in from_statuses:
            return None
        if not can_transition(current, to_status):
            raise ConflictError(f"A {current} workload cannot become {to_status}.")
        now = timezone.now()
        base, attempt = conditions_attempt(workload, to_status=to_status, attempt=fields.get("attempt"))
        conditions = _updated_conditions(base, status=to_status, reason=reason, message=message, now=now,
                                         attempt=attempt)
        updates = {
            "status": to_status,
            "status_reason": reason,
            "status_message": message,
            "conditions": conditions,
            "updated_at": now,
            **fields,
        }
        if to_status in TERMINAL:
            updates.setdefault("finished_at", now)
        if to_status != S.QUEUED:
            updates.setdefault("pending_reason", "")
            updates.setdefault("waiting_on", "")
        won = Workload.objects.filter(pk=workload_id, status=current).update(**updates)
        if not won:
            return None
        for key, value in updates.items():
            setattr(workload, key, value)
        # The usage ledger follows the allocation: charged from each admission until the release
        # (finished, stopped, or requeued after a preemption), at this transition's own time.
        if to_status in ACTIVE and current not in ACTIVE:
            usage_open(workload=workload, at=now)
        elif current in ACTIVE and to_status not in ACTIVE:
            usage_close(workload=workload, at=now)
        if current in ACTIVE and (to_status in TERMINAL or to_status == S.QUEUED):
            # The attempt is over: what it left open closes (its tracking runs stop saying "running").
            for handler in attempt_ended_handlers:
                handler(workload=workload, workload_status=to_status)
        workload_event_record(
            workload=workload, reason=reason, message=message, type=event_type,
            from_status=current, to_status=to_status,
        )
        publish(
            project_group(workload.project_id),
            {"type": "workload.status", "workload": workload.pk, "status": to_status, "reason": reason},
        )
        return workload


def workload_submit(
    *, project: Project, kind: str, name: str, pool: ResourcePool, spec: dict, created_by: User | None,
    priority: int, preemptible: bool, replicas: int, gpu_milli: int, cpu_milli: int, memory_mb: int,
    gpu_model: str = "", max_restarts: int = 0, max_runtime_seconds: int | None = None,
    accelerator_type: str = "", arch: str = "",
) -> Workload:
    """Store a new workload in QUEUED and ask the scheduler to look at it (outbox, same transaction)."""
    spec = storage_spec_check(project=project, pool=pool, spec=spec)  # volumes, datasets, model: exist, mount
    try:
        with transaction.atomic():
            workload = Workload.objects.create(
                project=project, kind=kind, name=name, pool=pool, spec=spec, created_by=created_by,
                priority=priority, preemptible=preemptible, replicas=replicas, gpu_milli=gpu_milli,
                cpu_milli=cpu_milli, memory_mb=memory_mb, gpu_model=gpu_model, max_restarts=max_restarts,
                max_runtime_seconds=max_runtime_seconds, accelerator_type=accelerator_type, arch=arch,
                status=S.QUEUED, status_reason="Submitted", status_message="Waiting for the scheduler.",
                conditions=_updated_conditions(
                    [], status=S.QUEUED, reason="Submitted", message="Waiting for the scheduler.", now=timezone.now(),
                    attempt=1,
                ),
            )
            workload_event_record(
                workload=workload, reason="Submitted", to_status=S.QUEUED,
                message=f"Submitted by {created_by.username if created_by else 'system'}.",
            )
            outbox_enqueue(topic="scheduling.cycle", payload={})
            # What a list row needs, for the dashboard's live `workloads` topic (docs/live.md).
            publish(project_group(project.pk), {
                "type": "workload.created", "workload": workload.pk, "name": workload.name, "kind": workload.kind,
                "status": workload.status,
            })
    except IntegrityError:
        raise ConflictError(f"A workload named '{name}' already exists in project '{project.slug}'.") from None
    return workload


def workload_stop(*, workload: Workload, user: User | None = None, reason: str = "StopRequested",
                  cause: str = StopCause.USER, message: str = "") -> Workload:
    """Ask a workload to stop. Queued ones stop at once; active ones go through STOPPING.
    `cause` and `message`: why (the idle culler passes StopCause.IDLE and what it saw)."""
    who = f" by {user.username}" if user else ""
    for _ in range(3):  # retry if the status moved under us
        workload.refresh_from_db()
        if workload.status in TERMINAL:
            raise ConflictError(f"Workload '{workload.name}' has already finished ({workload.status}).")
        if workload.status == S.STOPPING:
            if workload.stop_cause == StopCause.PREEMPTED:
                _workload_cancel_requeue(workload=workload, who=who)
            return workload
        if workload.status == S.QUEUED:
            done = workload_transition(
                workload_id=workload.pk, from_statuses={S.QUEUED}, to_status=S.STOPPED,
                reason=reason, message=message or f"Stopped{who} before it started.", stop_requested_at=timezone.now(),
                stop_cause=cause,
            )
        else:
            with transaction.atomic():
                done = workload_transition(
                    workload_id=workload.pk, from_statuses=ACTIVE - {S.STOPPING}, to_status=S.STOPPING,
                    reason=reason, message=message or f"Stop requested{who}.", stop_requested_at=timezone.now(),
                    stop_cause=cause,
                )
                if done is not None:
                    outbox_enqueue(topic="workload.stop", payload={"workload_id": workload.pk})
        if done is not None:
            return done
    workload.refresh_from_db()
    return workload


def _workload_cancel_requeue(*, workload: Workload, who: str) -> None:
    """A user stops a workload that is being preempted: it ends STOPPED instead of requeued."""
    with transaction.atomic():
        locked = Workload.objects.select_for_update().filter(pk=workload.pk, status=S.STOPPING).first()
        if locked is None or locked.stop_cause != StopCause.PREEMPTED:
            return
        Workload.objects.filter(pk=locked.pk).update(stop_cause=StopCause.USER, updated_at=timezone.now())
        workload.stop_cause = StopCause.USER
        workload_event_record(workload=locked, reason="StopRequested",
                              message=f"Stop requested{who} while it was being preempted; it will not be requeued.")


def workload_preempt(*, workload_id: int, preemptor_id: int | None, message: str) -> Workload | None:
    """Preempt an admitted or running workload: STOPPING now (SIGTERM, grace period to checkpoint),
    then back to QUEUED with its attempt count once its replicas have exited (the backend's
    reconciler sees its `stop_cause`). It keeps its resources while stopping. Returns None
    if it is no longer preemptible (finished, stopping, or marked non-preemptible)."""
    with transaction.atomic():
        workload = Workload.objects.select_for_update().filter(pk=workload_id).first()
        if workload is None or not workload.preemptible or workload.status not in (S.ADMITTED, S.RUNNING):
            return None
        done = workload_transition(
            workload_id=workload_id, from_statuses={S.ADMITTED, S.RUNNING}, to_status=S.STOPPING,
            reason="Preempted", message=message, event_type=EventType.WARNING, stop_requested_at=timezone.now(),
            stop_cause=StopCause.PREEMPTED, preempted_by_id=preemptor_id,
            preemptions=workload.preemptions + 1,
        )
        if done is not None:
            outbox_enqueue(topic="workload.stop", payload={"workload_id": workload_id})
        return done


def workload_stop_at_deadline(*, workload_id: int, now: datetime | None = None, signalled: bool = False,
                              detail: str = "") -> Workload | None:
    """A running workload has reached its run-time limit: RUNNING -> STOPPING (reason
    DeadlineExceeded), then, once its replicas have exited after SIGTERM and the grace period,
    FAILED with the same reason (the backend's reconciler sees its `stop_cause`).

    The stop itself is the one users and preemption get (the `workload.stop` outbox message).
    `signalled`: the backend enforced the limit itself and has already sent SIGTERM (Kubernetes'
    activeDeadlineSeconds): its clock decides, and no stop message is sent, only the grace-period
    escalation is left. Returns None when the workload is not running (or, unless `signalled`,
    not past its deadline).
    """
    now = now or timezone.now()
    with transaction.atomic():
        workload = Workload.objects.select_for_update().filter(pk=workload_id).first()
        if workload is None or workload.status != S.RUNNING:
            return None
        deadline = run_deadline(workload)
        if not signalled and (deadline is None or deadline > now):
            return None
        started = run_started_at(workload)
        message = (f"Reached {_limit_text(workload)}"
                   + (f" (running since {started.isoformat(timespec='seconds')})" if started else "")
                   + "; stopping its replicas." + (f" {detail}" if detail else ""))
        done = workload_transition(
            workload_id=workload_id, from_statuses={S.RUNNING}, to_status=S.STOPPING, reason=DEADLINE_REASON,
            message=message, event_type=EventType.WARNING, stop_requested_at=now, stop_cause=StopCause.DEADLINE,
            # The stop task sends SIGTERM only while term_sent_at is unset.
            term_sent_at=now if signalled else None, kill_sent_at=None,
        )
        if done is not None and not signalled:
            outbox_enqueue(topic="workload.stop", payload={"workload_id": workload_id})
        return done


def workload_run_clock_start(*, workload_id: int, at: datetime) -> Workload | None:
    """The run-time clock of a workload launched into a cluster's own queue (Kueue, Volcano; its
    runtime says CLOCK_AWAITS_PODS) starts when its first replica runs, at `at`: `started_at`
    moves there, and so does the start of its GPU-hour charge (the open usage interval). Returns
    the workload, or None when it is not running or its clock runs already."""
    now = timezone.now()
    with transaction.atomic():
        workload = Workload.objects.select_for_update().filter(pk=workload_id).first()
        if workload is None or workload.status != S.RUNNING or not Runtime.of(workload).clock_awaits_pods:
            return None
        at = min(max(at, workload.started_at or at), now)
        waited = (at - workload.started_at).total_seconds() if workload.started_at else 0.0
        runtime = Runtime.of(workload).without(CLOCK_AWAITS_PODS).to_json()
        Workload.objects.filter(pk=workload_id).update(started_at=at, runtime=runtime, updated_at=now)
        workload.started_at, workload.runtime, workload.updated_at = at, runtime, now
        usage_start_later(workload=workload, at=at)
        workload_event_record(
            workload=workload, reason="ReplicasRunning",
            message=f"The first replica runs: the run-time clock starts (the cluster's queue held it "
                    f"{format_duration(int(waited))} after Cairn's admission, not counted).")
        return workload


def workload_finish_at_deadline(*, workload: Workload, message: str) -> Workload | None:
    """STOPPING -> FAILED (DeadlineExceeded) for a workload stopped at its run-time limit whose
    replicas are gone. Called by the reconcilers with the row locked."""
    return workload_transition(
        workload_id=workload.pk, from_statuses={S.STOPPING}, to_status=S.FAILED, reason=DEADLINE_REASON,
        message=f"Stopped after reaching {_limit_text(workload)}. {message}", event_type=EventType.WARNING,
        runtime=Runtime.of(workload).replace(alive=False).to_json(),
    )


def _limit_text(workload: Workload) -> str:
    if workload.max_runtime_seconds:
        return f"its run-time limit of {format_duration(workload.max_runtime_seconds)}"
    return "its deadline"  # set on the backend's side only (e.g. a Job edited by hand)


def workload_delete(*, workload: Workload) -> None:
    if workload.status not in TERMINAL:
        raise ConflictError(
            f"Workload '{workload.name}' is {workload.status}; stop it and wait until it has finished before deleting it."
        )
    workload_id, project_id = workload.pk, workload.project_id
    with transaction.atomic():
        workload.delete()
        publish(project_group(project_id), {"type": "workload.deleted", "workload": workload_id})


def workload_validate_pool(*, project: Project, pool_name: str | None) -> ResourcePool:
    """The pool a new workload goes to: the named one, or the project's only quota pool."""
    if pool_name:
        pool = ResourcePool.objects.filter(name=pool_name).first()
        if pool is None:
            raise ServiceError(f"Unknown resource pool '{pool_name}'.")
        return pool
    pools = list(ResourcePool.objects.filter(quotas__project=project).distinct()[:2])
    if len(pools) == 1:
        return pools[0]
    if not pools:
        raise ServiceError(f"Project '{project.slug}' has no quota on any pool; ask an admin for one, or name a pool.")
    raise ServiceError("This project has quota on several pools: say which one with 'pool'.")


def quota_has_no_unfinished_workloads(quota) -> None:
    """Registered with quotas' delete checks: a quota its project's unfinished workloads hold stays."""
    if Workload.objects.filter(project_id=quota.project_id, pool_id=quota.pool_id).exclude(
            status__in=TERMINAL).exists():
        raise ConflictError("Workloads of this project are still queued or running on this pool; stop them first.")


def project_has_no_unfinished_workloads(project) -> None:
    """Registered with projects' delete checks: a project with unfinished workloads stays."""
    if Workload.objects.filter(project=project).exclude(status__in=TERMINAL).exists():
        raise ConflictError("The project still has unfinished workloads; stop them first.")


def volume_not_mounted_by_unfinished_workloads(volume) -> None:
    """Registered with storage's volume delete checks: a volume an unfinished workload mounts stays."""
    for name, spec in Workload.objects.filter(project_id=volume.project_id).exclude(
            status__in=TERMINAL).values_list("name", "spec"):
        if any(isinstance(v, dict) and v.get("name") == volume.name for v in (spec or {}).get("volumes") or []):
            raise ConflictError(f"Volume '{volume.name}' is mounted by workload '{name}', which has not finished; "
                                "stop it first.")


def model_not_served_by_unfinished_workloads(model) -> None:
    """Registered with storage's model delete checks: a model an unfinished workload serves stays."""
    for name, spec in Workload.objects.filter(project_id=model.project_id).exclude(
            status__in=TERMINAL).values_list("name", "spec"):
        served = (spec or {}).get("model")
        if isinstance(served, dict) and served.get("name") == model.name:
            raise ConflictError(f"Model '{model.name}' is served by workload '{name}', which has not finished; "
                                "stop it first.")


def dataset_not_mounted_by_unfinished_workloads(dataset) -> None:
    """Registered with storage's dataset delete checks."""
    for name, spec in Workload.objects.filter(project_id=dataset.project_id).exclude(
            status__in=TERMINAL).values_list("name", "spec"):
        if any(isinstance(d, dict) and d.get("name") == dataset.name for d in (spec or {}).get("datasets") or []):
            raise ConflictError(f"Dataset '{dataset.name}' is mounted by workload '{name}', which has not finished; "
                                "stop it first.")
