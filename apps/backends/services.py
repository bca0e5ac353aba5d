"""Realise workloads on their backend and write back what happened.

- `workload_dispatch`: ADMITTED -> launch attempt n+1 -> RUNNING (idempotent).
- `workload_stop_signal`: SIGTERM the replicas of a STOPPING workload.
- `reconcile_once`: the level-triggered pass over local workloads: exits, gang failures,
  restarts, run-time limits, stop escalation, lost replicas, adoption after a Cairn crash, lost
  dispatches.
- `local_backend_shutdown`: a clean Ctrl-C of the embedded server.

Every decision about one workload is taken while holding its row lock, so a dispatch task,
a stop task and the reconciler never act on the same workload at once; status changes go
through `workload_transition` (compare-and-set).

`workload.runtime` is this module's bookkeeping for the current attempt:
    {"backend", "attempt", "replicas": [{"replica", "pid", "create_time", ...}], "alive",
     "owner": the Cairn process managing it, "failure": the replica failure being handled,
     plus "url"/"token"/"endpoints" for users}
Why it is stopping and the stop escalation are typed fields of the workload (`stop_cause`,
`preempted_by`, `term_sent_at`, `kill_sent_at`), reset at each dispatch.
"""
from __future__ import annotations

import itertools
import logging
import os
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.clusters.choices import Backend as BackendName
from apps.workloads.choices import ACTIVE, EventType, StopCause, WorkloadStatus
from apps.workloads.deadlines import run_deadline
from apps.workloads.lifecycle import (
    SERVER_SHUTDOWN,
    AllGone,
    AllSucceeded,
    AttemptFailed,
    RestartFailed,
    first_failure,
    workload_locked,
    workload_observe,
    workload_runtime_save,
)
from apps.workloads.models import Workload
from apps.workloads.services import (
    workload_event_record,
    workload_stop_at_deadline,
    workload_transition,
)

from .base import LOST, Backend, BackendUnavailable, LaunchError, ReplicaState, backend_for, backend_named
from .local.backend import identity_alive, process_identity
from .loops import reconciler_wakeup

logger = logging.getLogger(__name__)
S = WorkloadStatus


def _grace_seconds() -> float:
    return float(settings.CAIRN["STOP_GRACE_SECONDS"])


_identity: dict | None = None


def _me() -> dict:
    """This Cairn process (recomputed after a fork: Celery workers are forked)."""
    global _identity
    if _identity is None or _identity["pid"] != os.getpid():
        _identity = process_identity()
    return _identity


def _is_me(identity: dict | None) -> bool:
    me = _me()
    return bool(identity) and identity.get("pid") == me["pid"] and abs(
        (identity.get("create_time") or 0) - me["create_time"]
    ) < 0.05


def _escalate(workload: Workload, backend: Backend) -> None:
    """SIGTERM the live replicas once; SIGKILL them once the grace period has passed."""
    runtime = workload.runtime or {}
    now = timezone.now()
    if workload.term_sent_at is None:
        backend.signal(workload)
        workload_runtime_save(workload, runtime, term_sent_at=now)
    elif (now - workload.term_sent_at).total_seconds() >= _grace_seconds():
        backend.signal(workload, force=True)
        if workload.kill_sent_at is None:
            workload_runtime_save(workload, runtime, kill_sent_at=now)


# -- dispatch ------------------------------------------------------------------------------------

# A new attempt starts with none of the last stop's facts (they were runtime keys, replaced here).
_STOP_RESET = {"stop_cause": StopCause.NONE, "preempted_by": None, "term_sent_at": None, "kill_sent_at": None}

def workload_dispatch(*, workload_id: int) -> Workload | None:
    """Start an ADMITTED workload: bump `attempt`, launch its replicas, ADMITTED -> RUNNING.

    Idempotent: the row stays locked while launching, so a second delivery waits, then finds
    the workload RUNNING (or anything but ADMITTED) and does nothing. A cluster whose backend
    is not available fails the workload with reason BackendUnavailable.
    """
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None or workload.status != S.ADMITTED:
            return workload
        return _launch_admitted(workload) or workload


def _launch_admitted(workload: Workload) -> Workload | None:
    """Launch a locked ADMITTED workload; returns it once it changed status, else None."""
    try:
        backend = backend_for(workload)
    except BackendUnavailable as exc:
        return workload_transition(
            workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.FAILED,
            reason="BackendUnavailable", message=str(exc), event_type=EventType.WARNING,
        )
    if (workload.runtime or {}).get("alive") and not _previous_replicas_gone(workload, backend):
        return None  # a requeued or re-placed workload: wait for its old replicas to exit first
    attempt = workload.attempt + 1
    try:
        runtime = backend.launch(workload, attempt=attempt)
    except LaunchError as exc:
        return workload_transition(
            workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.FAILED, reason="LaunchFailed",
            message=f"Could not start the replicas: {exc}", event_type=EventType.WARNING, attempt=attempt,
            runtime={"backend": backend.name, "attempt": attempt, "replicas": [], "alive": False}, **_STOP_RESET,
        )
    runtime["owner"] = _me()
    done = workload_transition(
        workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.RUNNING, reason="Started",
        message=f"Started {workload.replicas} replica(s), attempt {attempt}.",
        attempt=attempt, runtime=runtime, started_at=timezone.now(), **_STOP_RESET,
    )
    if done is None:  # cannot happen while we hold the row lock, but never leave strays behind
        workload.runtime = runtime
        backend.signal(workload, force=True)
        return None
    if runtime.get("ignored_env"):
        workload_event_record(
            workload=done, reason="ReservedEnvIgnored", type=EventType.WARNING,
            message="These env keys are set by Cairn and were not taken from the spec: "
            + ", ".join(runtime["ignored_env"]),
        )
    return done


def _previous_replicas_gone(workload: Workload, backend: Backend) -> bool:
    """True once no replica of the recorded (earlier) attempt is alive; signals them meanwhile."""
    if any(state.alive for state in backend.observe(workload)):
        _escalate(workload, backend)
        return False
    workload_runtime_save(workload, {**(workload.runtime or {}), "alive": False})
    return True


# -- stop ----------------------------------------------------------------------------------------

def workload_stop_signal(*, workload_id: int) -> int:
    """SIGTERM every live replica of a STOPPING workload (or of one no longer active that still
    has replicas, e.g. requeued), once: redeliveries do nothing. The reconciler escalates to
    SIGKILL after the grace period and records STOPPED. Returns how many replicas were signalled."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None:
            return 0
        runtime = workload.runtime or {}
        if workload.status != S.STOPPING and (workload.status in ACTIVE or not runtime.get("alive")):
            return 0
        try:
            backend = backend_for(workload)
        except BackendUnavailable:
            return 0
        if workload.term_sent_at is not None:
            return 0  # already asked (a redelivery): a second SIGTERM could cut a checkpoint short
        signalled = backend.signal(workload)
        workload_runtime_save(workload, runtime, term_sent_at=timezone.now())
    reconciler_wakeup.set()
    return signalled


# -- reconcile -----------------------------------------------------------------------------------

_cursor = 0  # rotates through workloads so a large backlog is covered over several passes


def _local_workloads():
    return Workload.objects.filter(pool__cluster__backend=BackendName.LOCAL)


def reconcile_once(*, limit: int = 200) -> int:
    """One level-triggered pass over the active workloads of local clusters (at most `limit`),
    plus inactive ones whose replicas are still alive. Returns how many it acted on."""
    global _cursor
    active = _local_workloads().filter(status__in=ACTIVE).order_by("pk").values_list("pk", flat=True)
    ids = list(active.filter(pk__gt=_cursor)[:limit])
    if len(ids) < limit:
        ids += [pk for pk in active.filter(pk__lte=_cursor)[: limit - len(ids)] if pk not in ids]
    _cursor = ids[-1] if len(ids) >= limit else 0
    leftovers = list(
        _local_workloads().filter(runtime__alive=True).exclude(status__in=ACTIVE).values_list("pk", flat=True)[:limit]
    )
    acted = 0
    for workload_id, reconcile in itertools.chain(
        ((pk, _reconcile_active) for pk in ids), ((pk, _reconcile_leftover) for pk in leftovers)
    ):
        try:
            with transaction.atomic():
                workload = workload_locked(workload_id, skip_locked=True)
                if workload is not None and reconcile(workload):
                    acted += 1
        except Exception:
            logger.exception("reconciler: workload %s", workload_id)
    return acted


def _reconcile_active(workload: Workload) -> bool:
    if workload.status not in ACTIVE:
        return False
    if workload.status == S.ADMITTED:
        # Normally the dispatch task launches it; if that message was lost, we do.
        return _launch_admitted(workload) is not None
    backend = backend_for(workload)
    adopted = _adopt_if_orphaned(workload)
    states = backend.observe(workload)
    if workload.status == S.STOPPING:
        return _reconcile_stopping(workload, backend, states) or adopted
    return _reconcile_running(workload, backend, states) or adopted


def _adopt_if_orphaned(workload: Workload) -> bool:
    """Take over a workload whose managing Cairn process is gone (event "Adopted", once)."""
    runtime = workload.runtime or {}
    owner = runtime.get("owner")
    if _is_me(owner) or identity_alive(owner):
        return False
    workload_runtime_save(workload, {**runtime, "owner": _me()})
    previous = f"Cairn process {owner['pid']}" if owner else "an unknown Cairn process"
    workload_event_record(
        workload=workload, reason="Adopted",
        message=f"Re-adopted {len(runtime.get('replicas', []))} replica(s) of attempt {runtime.get('attempt')} "
        f"started by {previous}, which is gone.",
    )
    return True


def _reconcile_stopping(workload: Workload, backend: Backend, states: list[ReplicaState]) -> bool:
    if any(state.alive for state in states):
        _escalate(workload, backend)
        return True
    workload_observe(workload=workload, observation=AllGone(
        killed=workload.kill_sent_at is not None, grace_seconds=_grace_seconds()))
    return True


def _reconcile_running(workload: Workload, backend: Backend, states: list[ReplicaState]) -> bool:
    runtime = workload.runtime or {}
    failure = runtime.get("failure")
    acted = False
    if failure is None and _past_deadline(workload) and any(s.alive for s in states) and not any(
            s.failed for s in states):
        # Still running at its run-time limit: the same stop as a user's (SIGTERM now, SIGKILL
        # after the grace period), then FAILED. A replica that failed first is handled as a
        # failure below (with no restart, the limit having passed).
        if workload_stop_at_deadline(workload_id=workload.pk) is not None:
            workload.refresh_from_db(fields=["status", "runtime", "stop_requested_at", "stop_cause", "term_sent_at",
                                             "kill_sent_at"])
            _escalate(workload, backend)
            return True
    if failure is None:
        if not states and workload.replicas == 0:
            return False  # nothing asked to run, nothing to watch
        if not states:
            failure = {"replica": None, "phase": LOST, "exit_code": None,
                       "message": "No replica of this attempt is known to the backend."}
        else:
            failed = [state for state in states if state.failed]
            if not failed:
                if all(not state.alive for state in states):
                    workload_observe(workload=workload, observation=AllSucceeded(replicas=len(states)))
                    return True
                return False
            # The first to fail is the cause; replicas lost or killed by us afterwards are not.
            first = first_failure(failed)
            failure = {"replica": first.replica, "phase": first.phase, "exit_code": first.exit_code,
                       "message": first.describe()}
        workload_runtime_save(workload, {**runtime, "failure": failure})
        acted = True
        logger.info("reconciler: workload %s: %s", workload.pk, failure["message"])
    if any(state.alive for state in states):
        _escalate(workload, backend)  # gang: the others cannot go on without it
        return True
    return _restart_or_finish(workload, backend, failure) or acted


def _past_deadline(workload: Workload) -> bool:
    deadline = run_deadline(workload)
    return deadline is not None and deadline <= timezone.now()


def _restart_or_finish(workload: Workload, backend: Backend, failure: dict) -> bool:
    def relaunch(attempt: int) -> dict:
        try:
            new_runtime = backend.launch(workload, attempt=attempt)
        except LaunchError as exc:
            raise RestartFailed(str(exc)) from exc
        return {**new_runtime, "owner": _me()}

    workload_observe(workload=workload, relaunch=relaunch, observation=AttemptFailed(
        message=failure["message"], exit_code=failure.get("exit_code"), lost=failure["phase"] == LOST))
    return True


def _reconcile_leftover(workload: Workload) -> bool:
    """A workload no longer active (requeued, finished elsewhere) whose replicas still run."""
    runtime = workload.runtime or {}
    if workload.status in ACTIVE or not runtime.get("alive"):
        return False
    backend = backend_for(workload)
    if any(state.alive for state in backend.observe(workload)):
        _escalate(workload, backend)
    else:
        workload_runtime_save(workload, {**runtime, "alive": False})
    return True


# -- shutdown ------------------------------------------------------------------------------------



def local_backend_shutdown(*, grace_seconds: float | None = None) -> int:
    """Stop every live local replica this process manages, for a clean exit of the embedded server.

    Ctrl-C of `make run` stops the work it runs: admitted and running workloads end STOPPED
    (reason ServerShutdown, an event saying so) and are not started again by the next `make run`;
    stopping ones become STOPPED, preempted ones go back to the queue. Replicas get SIGTERM, then
    SIGKILL after the grace period. Returns how many replicas were signalled.
    """
    grace = _grace_seconds() if grace_seconds is None else grace_seconds
    backend = backend_named(BackendName.LOCAL)
    owned = [
        w for w in _local_workloads().filter(runtime__alive=True).select_related("pool__cluster", "project")
        if _is_me((w.runtime or {}).get("owner"))
    ]
    for workload in owned:
        if workload.status in (S.ADMITTED, S.RUNNING):
            try:
                # STOPPING first: if Cairn dies before the end, the next start finishes the stop.
                workload_transition(
                    workload_id=workload.pk, from_statuses={S.ADMITTED, S.RUNNING}, to_status=S.STOPPING,
                    reason=SERVER_SHUTDOWN, message="Stopping: Cairn (embedded) is shutting down.",
                    event_type=EventType.WARNING, stop_cause=StopCause.SHUTDOWN,
                )
            except Exception:
                logger.exception("shutdown: could not stop workload %s", workload.pk)
    signalled = sum(backend.signal(workload) for workload in owned)
    if signalled:
        logger.info("shutdown: sent SIGTERM to %s replica(s); waiting up to %gs", signalled, grace)
    deadline = time.monotonic() + grace

    def any_alive() -> bool:
        return any(state.alive for workload in owned for state in backend.observe(workload))

    while time.monotonic() < deadline and any_alive():
        time.sleep(0.1)
    if any_alive():
        killed = sum(backend.signal(workload, force=True) for workload in owned)
        logger.warning("shutdown: killed %s replica(s) that outlived the grace period", killed)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any_alive():
            time.sleep(0.05)
    for workload in owned:
        try:
            workload.refresh_from_db(fields=["status", "runtime", "attempt", "stop_cause", "preempted_by",
                                             "term_sent_at", "kill_sent_at"])
            runtime = {**(workload.runtime or {}), "alive": False}
            if workload.status == S.STOPPING:
                workload_observe(workload=workload, observation=AllGone(
                    detail="Its replicas exited while Cairn shut down."))
            else:
                workload_runtime_save(workload, runtime)
        except Exception:
            logger.exception("shutdown: could not record workload %s", workload.pk)
    return signalled
