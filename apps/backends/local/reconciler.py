"""The local backend's reconciler: a level-triggered pass over the workloads of local clusters
(apps.backends.services does the shared steps: dispatch, claims, stop escalation, failures,
restarts), plus what only processes on this machine need:

- adoption: replicas started by a Cairn process that is gone (a crash, a restart of
  `make run`) are taken over by this one (event "Adopted", once);
- `local_backend_shutdown`: a clean Ctrl-C of the embedded server stops the work it runs.
"""
from __future__ import annotations

import logging
import time

from django.conf import settings

from apps.workloads.choices import ACTIVE, EventType, StopCause, WorkloadStatus
from apps.workloads.lifecycle import SERVER_SHUTDOWN, AllGone, workload_observe, workload_runtime_save
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record, workload_transition

from ..base import backend_named
from ..identity import identity_alive
from ..services import _is_me, _me, reconcile_workloads, workload_reconcile
from . import SPEC

logger = logging.getLogger(__name__)
S = WorkloadStatus


def _local_workloads():
    return Workload.objects.filter(pool__cluster__backend=SPEC.name)


def reconcile_once(*, limit: int = 200) -> int:
    """One level-triggered pass over the active workloads of local clusters (at most `limit`),
    plus inactive ones whose replicas are still alive. Returns how many it acted on."""
    return reconcile_workloads(_local_workloads(), key=SPEC.name, reconcile=_reconcile_active, limit=limit)


def _reconcile_active(workload: Workload) -> bool:
    if workload.status not in ACTIVE or workload.status == S.ADMITTED:
        return False  # ADMITTED: reconcile_workloads dispatches it
    adopted = False
    if not (workload.status == S.RUNNING and (workload.runtime or {}).get("launching")):
        adopted = _adopt_if_orphaned(workload)
    return workload_reconcile(workload) or adopted


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


# -- shutdown ------------------------------------------------------------------------------------

def local_backend_shutdown(*, grace_seconds: float | None = None) -> int:
    """Stop every live local replica this process manages, for a clean exit of the embedded server.

    Ctrl-C of `make run` stops the work it runs: admitted and running workloads end STOPPED
    (reason ServerShutdown, an event saying so) and are not started again by the next `make run`;
    stopping ones become STOPPED, preempted ones go back to the queue. Replicas get SIGTERM, then
    SIGKILL after the grace period. Returns how many replicas were signalled.
    """
    grace = float(settings.CAIRN["STOP_GRACE_SECONDS"]) if grace_seconds is None else grace_seconds
    backend = backend_named(SPEC.name)
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
