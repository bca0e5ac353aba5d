"""The cluster's own admission authority: Kueue or Volcano (issue 42, deliver 4).

On a cluster registered with `kueue_queue` or `volcano`, Cairn's admission (its quota and
placement) is a reservation and the cluster's queue decides when the pods may run. The reconciler
asks `queue_admission` at every look at a training attempt; it reads what the queue says and makes
it Cairn's own conditions:

- Kueue: the Workload Kueue makes for the suspended Job (label `kueue.x-k8s.io/job-uid`). Held:
  `Admitted` False with Kueue's reason and message; admitted: `Admitted` True (AdmittedByKueue);
  evicted after admission (preempted, ...; Kueue suspends the Job): requeued, reason HeldByQueue,
  no restart spent.
- Volcano: the attempt's PodGroup (`cairn-<id>-<attempt>`, minMember = replicas; its pods use
  `schedulerName: volcano` and the group annotation). Phase Pending: `Admitted` False with
  Volcano's reason (the queue has not taken the gang in); Inqueue / Running: `Admitted` True
  (AdmittedByVolcano); `GangScheduled` False with Volcano's Unschedulable reason and message until
  the phase is Running, then True; a gang that ran and that Volcano puts back to Pending / Inqueue
  (its pods evicted: preempt or reclaim) is requeued with reason HeldByQueue, no restart spent.

The run-time clock (deadlines.py) starts at the first replica running, not at Cairn's admission:
the launch marks the run CLOCK_AWAITS_PODS, and `workload_run_clock_start` moves `started_at`
(and the GPU-hour charge) to the pods' start.

Neither Kueue's Workloads nor PodGroups are watched: while the queue holds an attempt the
workload is looked at again every QUEUE_POLL_SECONDS.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from apps.workloads.choices import EventType
from apps.workloads.deadlines import CLOCK_AWAITS_PODS
from apps.workloads.lifecycle import HELD_BY_QUEUE
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record, workload_run_clock_start

from . import manifests as m
from .backend import namespace_of, options_for
from .client import ApiError
from .status import KUEUE_JOB_UID_LABEL, KUEUE_WORKLOADS, VOLCANO_PODGROUPS, kueue_state, replicas_started_at, volcano_state

if TYPE_CHECKING:
    from .reconciler import ClusterReconciler

logger = logging.getLogger(__name__)

QUEUE_POLL_SECONDS = 10.0


@dataclass(frozen=True)
class QueueVerdict:
    requeued: bool = False  # sent back to Cairn's queue (HeldByQueue): the look is over
    held: bool = False  # the cluster's queue has not let the gang run yet: no pending timeout


NO_QUEUE = QueueVerdict()


def queue_admission(rec: ClusterReconciler, workload: Workload, job: dict | None, pods: list[dict]) -> QueueVerdict:
    """What the cluster's queue says of the workload's current attempt (`job`, `pods`), written
    into Cairn's conditions; the run-time clock started once a replica runs."""
    options = options_for(workload.pool.cluster)
    if options.kueue_queue:
        verdict = _kueue(rec, workload, job)
    elif options.volcano:
        verdict = _volcano(rec, workload, pods, queue=options.volcano_queue)
    else:
        return NO_QUEUE
    if verdict.requeued:
        return verdict
    if verdict.held:
        rec.queue.add_after("workload", workload.pk, QUEUE_POLL_SECONDS)
    _start_clock(rec, workload, pods)
    return verdict


def _start_clock(rec: ClusterReconciler, workload: Workload, pods: list[dict]) -> None:
    if not (workload.runtime or {}).get(CLOCK_AWAITS_PODS):
        return
    at = replicas_started_at(pods, now=time.time())
    if at is None:
        return
    done = workload_run_clock_start(workload_id=workload.pk, at=datetime.fromtimestamp(at, tz=UTC))
    if done is not None:
        workload.started_at, workload.runtime, workload.updated_at = done.started_at, done.runtime, done.updated_at
        rec._seen(workload)


# -- Kueue ----------------------------------------------------------------------------------------

def _kueue(rec: ClusterReconciler, workload: Workload, job: dict | None) -> QueueVerdict:
    if job is None:
        return NO_QUEUE
    runtime = workload.runtime or {}
    suspended = bool((job.get("spec") or {}).get("suspend"))
    if not suspended and runtime.get("kueue_admitted"):
        return NO_QUEUE  # admitted and running: nothing to ask Kueue
    uid = (job.get("metadata") or {}).get("uid") or ""
    group, version, plural = KUEUE_WORKLOADS
    try:
        found = rec.clients.call(rec.clients.custom.list_namespaced_custom_object, group, version,
                                 namespace_of(workload), plural, label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}")
    except ApiError as exc:
        logger.warning("kubernetes reconciler: Kueue workloads of %s: %s %s", workload.pk, exc.status, exc.reason)
        return QueueVerdict(held=suspended)
    state = kueue_state(found.get("items") or [])
    if state is None:
        state = ("held", "Pending", "Waiting for Kueue to take the Job into its queue.") if suspended else \
            ("admitted", "Admitted", "")
    kind, reason, message = state
    if kind == "evicted" and runtime.get("kueue_admitted"):
        return QueueVerdict(requeued=rec._requeue_free(
            workload, HELD_BY_QUEUE, f"Kueue evicted the Job ({reason}: {message}); requeued without spending "
            "a restart.", runtime={**runtime, "kueue_admitted": False}))
    if kind == "admitted" and not suspended:
        if rec._save(workload, {**runtime, "kueue_admitted": True}):
            _set_conditions(workload, {"type": "Admitted", "status": "True", "reason": "AdmittedByKueue",
                                       "message": "Kueue admitted the Job" + (f": {message}" if message else ".")})
        return NO_QUEUE
    _set_conditions(workload, {"type": "Admitted", "status": "False", "reason": reason,
                               "message": f"Kueue holds the Job: {message}".rstrip(": ")})
    return QueueVerdict(held=True)


# -- Volcano --------------------------------------------------------------------------------------

def _volcano(rec: ClusterReconciler, workload: Workload, pods: list[dict], *, queue: str) -> QueueVerdict:
    runtime = workload.runtime or {}
    attempt = int(runtime.get("attempt") or workload.attempt)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and not (p.get("metadata") or {}).get("deletionTimestamp")]
    if (runtime.get("volcano_running") == attempt and not runtime.get(CLOCK_AWAITS_PODS)
            and len(running) == len(pods) >= workload.replicas):
        return NO_QUEUE  # the whole gang runs: nothing to ask Volcano (until a pod stops or goes)
    group, version, plural = VOLCANO_PODGROUPS
    try:
        podgroup = rec.clients.call(rec.clients.custom.get_namespaced_custom_object, group, version,
                                    namespace_of(workload), plural, m.job_name(workload.pk, attempt))
    except ApiError as exc:
        if exc.status != 404:
            logger.warning("kubernetes reconciler: PodGroup of %s: %s %s", workload.pk, exc.status, exc.reason)
        return NO_QUEUE  # none (yet, or deleted): the Job's own paths decide
    state = volcano_state(podgroup, queue=queue)
    if runtime.get("volcano_running") == attempt and state.phase in ("Pending", "Inqueue"):
        return QueueVerdict(requeued=rec._requeue_free(
            workload, HELD_BY_QUEUE, f"Volcano took the running gang back into its queue ({state.phase}: "
            f"{state.reason}{': ' + state.message if state.message else ''}); requeued without spending a restart."))
    admitted = ({"type": "Admitted", "status": "True", "reason": "AdmittedByVolcano",
                 "message": f"Volcano's queue took the gang in (PodGroup {state.phase})."} if state.admitted else
                {"type": "Admitted", "status": "False", "reason": state.reason,
                 "message": f"Volcano holds the PodGroup ({state.phase}): {state.message}"})
    gang = ({"type": "GangScheduled", "status": "True", "reason": state.phase,
             "message": "Volcano bound the gang: its pods run."} if state.running else
            {"type": "GangScheduled", "status": "False", "reason": state.reason,
             "message": f"PodGroup {state.phase}: {state.message}"})
    if state.running and runtime.get("volcano_running") != attempt:
        if not rec._save(workload, {**runtime, "volcano_running": attempt}):
            return NO_QUEUE  # changed meanwhile: looked at again
    _set_conditions(workload, admitted, gang)
    return QueueVerdict(held=not state.running)


# -- Cairn's conditions ---------------------------------------------------------------------------

def _set_conditions(workload: Workload, *wanted: dict) -> None:
    """Write these conditions where they changed (lastTransitionTime when the status flips), with
    a Warning event for each that says False."""
    current = {c.get("type"): c for c in workload.conditions or []}
    now = timezone.now().isoformat()
    warnings = []
    for cond in wanted:
        old = current.get(cond["type"]) or {}
        if all(old.get(k) == cond[k] for k in ("status", "reason", "message")):
            continue
        transition = now if old.get("status") != cond["status"] else old.get("lastTransitionTime") or now
        current[cond["type"]] = {**cond, "lastTransitionTime": transition}
        if cond["status"] == "False":
            warnings.append(cond)
    if current == {c.get("type"): c for c in workload.conditions or []}:
        return
    conditions = list(current.values())
    Workload.objects.filter(pk=workload.pk).update(conditions=conditions, updated_at=timezone.now())
    workload.conditions = conditions
    for cond in warnings:
        workload_event_record(workload=workload, reason=cond["reason"], message=cond["message"],
                              type=EventType.WARNING)
