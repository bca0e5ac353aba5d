"""Writes for notebooks: the idle culler's pass, reclaiming an idle notebook, starting a stopped
one again (its home folder kept)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.core.errors import ConflictError
from apps.core.outbox import outbox_enqueue
from apps.workloads.choices import Kind, StopCause, WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.services import workload_stop, workload_transition

from .activity import observe
from .choices import IDLE_RECLAIMED
from .culling import Verdict, cull_verdict
from .models import NotebookActivity, NotebookReclaim

logger = logging.getLogger(__name__)
S = WorkloadStatus

# Apps above notebooks that know a notebook's GPU utilisation (telemetry) register a reader here at
# AppConfig.ready(): reader(workload_ids, since) -> {workload id: highest GPU utilisation, percent}.
gpu_utilisation_readers: list[Callable[[list[int], datetime], dict[int, float]]] = []
GPU_WINDOW_SECONDS = 120  # telemetry older than this says nothing about now


def idle_timeout_of(workload: Workload) -> int:
    """The notebook's own idle_timeout, else its project's (seconds; 0: never)."""
    spec = workload.spec if isinstance(workload.spec, dict) else {}
    own = spec.get("idle_timeout")
    if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
        return own
    return workload.project.notebook_idle_timeout


def _gpu_utilisation(ids: list[int], now: datetime) -> dict[int, float]:
    found: dict[int, float] = {}
    since = now - timezone.timedelta(seconds=GPU_WINDOW_SECONDS)
    for reader in gpu_utilisation_readers:
        for key, value in reader(ids, since).items():
            found[key] = max(value, found.get(key, value))
    return found


def notebook_cull_pass(*, now: datetime | None = None, workload_ids: Iterable[int] | None = None) -> list[int]:
    """Look at every running notebook once: record what it is doing, stop those idle past their
    idle_timeout. Returns the ids it stopped."""
    now = now or timezone.now()
    notebooks = Workload.objects.select_related("project").filter(kind=Kind.NOTEBOOK, status=S.RUNNING)
    if workload_ids is not None:
        notebooks = notebooks.filter(pk__in=list(workload_ids))
    notebooks = list(notebooks)
    if not notebooks:
        return []
    ids = [w.pk for w in notebooks]
    gpus = _gpu_utilisation(ids, now)
    previous = {a.workload_id: a for a in NotebookActivity.objects.filter(workload_id__in=ids)}
    threshold = float(settings.CAIRN["NOTEBOOK_GPU_IDLE_PERCENT"])
    stopped = []
    for workload in notebooks:
        observation = observe(workload, gpu_utilisation=gpus.get(workload.pk))
        before = previous.get(workload.pk)
        if before is not None and before.attempt == workload.attempt and before.reached:
            active_at = before.active_at
        else:  # the idle clock starts when its IDE first answers (starting up is not idling)
            active_at = now if observation.reached else None
        verdict = cull_verdict(
            observation=observation, now=now, started_at=workload.started_at or now, previous_active_at=active_at,
            idle_timeout=idle_timeout_of(workload), gpu_threshold=threshold,
        )
        NotebookActivity.objects.update_or_create(workload=workload, defaults={
            "attempt": workload.attempt, "checked_at": now, "active_at": verdict.active_at,
            "deadline": verdict.deadline, "busy_kernels": observation.busy_kernels, "kernels": observation.kernels,
            "connections": observation.connections, "gpu_utilisation": observation.gpu_utilisation,
            "reached": observation.reached, "summary": verdict.why[:300],
        })
        if verdict.cull and notebook_reclaim(workload=workload, verdict=verdict, now=now):
            stopped.append(workload.pk)
    return stopped


def notebook_reclaim(*, workload: Workload, verdict: Verdict, now: datetime) -> bool:
    """Stop an idle notebook: status reason IdleReclaimed, an event that says why, a reclaim row
    (its GPUs, counted per project). The dashboard's live notice is the `workload.status` frame
    with reason IdleReclaimed that the transition publishes. False if it was no longer running."""
    with transaction.atomic():
        stopped = workload_stop(workload=workload, reason=IDLE_RECLAIMED, cause=StopCause.IDLE,
                                message=f"Reclaimed by the idle culler. {verdict.why} Its files are kept: "
                                        "start it again to go on.")
        if stopped.status != S.STOPPING or stopped.stop_cause != StopCause.IDLE:
            return False
        NotebookReclaim.objects.create(project_id=workload.project_id, workload=workload, reclaimed_at=now,
                                       gpus=workload.gpu_milli / 1000, idle_seconds=verdict.idle_seconds)
    logger.info("culler: notebook %s (%s) reclaimed: %s", workload.pk, workload.project.slug, verdict.why)
    return True


def notebook_start(*, workload: Workload, user: User | None) -> Workload:
    """Start a stopped notebook again: back to the queue, the same workload, its home folder and
    files kept (the local backend's per-workload folder; the PVC on Kubernetes)."""
    if workload.kind != Kind.NOTEBOOK:
        raise ConflictError("Only notebooks are started again; submit other workloads anew.")
    who = user.username if user is not None else "system"
    now = timezone.now()
    with transaction.atomic():
        done = workload_transition(
            workload_id=workload.pk, from_statuses={S.STOPPED}, to_status=S.QUEUED, reason="StartRequested",
            message=f"Started again by {who}; its files are kept.", finished_at=None, stop_requested_at=None,
            stop_cause=StopCause.NONE, exit_code=None, admitted_at=None,
        )
        if done is None:
            workload.refresh_from_db()
            raise ConflictError(f"Notebook '{workload.name}' is {workload.status}: only a stopped notebook can be "
                                "started again.")
        NotebookReclaim.objects.filter(workload=workload, restarted_at__isnull=True).update(restarted_at=now)
        NotebookActivity.objects.filter(workload=workload).delete()
        outbox_enqueue(topic="scheduling.cycle", payload={})
    return done


__all__ = ["gpu_utilisation_readers", "idle_timeout_of", "notebook_cull_pass", "notebook_reclaim", "notebook_start"]
