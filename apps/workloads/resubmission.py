"""Run again: an ended workload submitted anew as a new workload that links to the old one.

Why a new workload, not a new attempt of the same one (docs/training.md, "Run again"): an ended
workload is a record. Its status, exit code, events, logs and runs per attempt, its goodput, its
GPU-hours and a sweep's link to it stay exactly as they were; the new one starts with fresh
conditions, attempt 1, its own restart budget and run-time limit, and says where it came from
(`resubmitted_from`, and an event on each). A stopped notebook is the exception users know: "Start
again" (apps/notebooks/services.py) keeps it, because its home folder is the point of it.
"""
from __future__ import annotations

import re

from django.db import transaction

from apps.accounts.models import User
from apps.core.errors import ConflictError, ServiceError

from .choices import TERMINAL
from .models import Workload
from .services import workload_event_record, workload_submit

NAME_MAX = 63
_SUFFIX = re.compile(r"^(?P<base>.+?)-(?P<n>\d+)$")


def resubmission_name(workload: Workload) -> str:
    """The next free name of the chain: `train` -> `train-2`, `train-2` -> `train-3`, ..."""
    match = _SUFFIX.match(workload.name)
    base, n = (match["base"], int(match["n"])) if match else (workload.name, 1)
    taken = set(Workload.objects.filter(project_id=workload.project_id, name__startswith=base[:40])
                .values_list("name", flat=True))
    while True:
        n += 1
        suffix = f"-{n}"
        name = base[:NAME_MAX - len(suffix)].rstrip("-") + suffix
        if name not in taken:
            return name


def workload_resubmit(*, workload: Workload, user: User | None, name: str = "") -> Workload:
    """Submit an ended workload again: the same kind, pool, spec and resources, priority and
    limits, as a new workload named `name` (default: the next free `<name>-<n>`), queued."""
    workload.refresh_from_db()
    if workload.status not in TERMINAL:
        raise ConflictError(f"Workload '{workload.name}' is {workload.status}: it can be run again once it has "
                            "ended (stop it first).")
    if workload.pool is None:
        raise ServiceError("Its pool is gone: submit it anew to another pool.")
    chosen = name or resubmission_name(workload)
    who = user.username if user is not None else "system"
    with transaction.atomic():
        new = workload_submit(
            project=workload.project, kind=workload.kind, name=chosen, pool=workload.pool,
            spec=dict(workload.spec or {}), created_by=user, priority=workload.priority,
            preemptible=workload.preemptible, replicas=workload.replicas, gpu_milli=workload.gpu_milli,
            cpu_milli=workload.cpu_milli, memory_mb=workload.memory_mb, gpu_model=workload.gpu_model,
            max_restarts=workload.max_restarts, max_runtime_seconds=workload.max_runtime_seconds,
            accelerator_type=workload.accelerator_type, arch=workload.arch,
        )
        Workload.objects.filter(pk=new.pk).update(resubmitted_from=workload)
        new.resubmitted_from = workload
        workload_event_record(workload=new, reason="RunAgain",
                              message=f"Runs '{workload.name}' (#{workload.pk}) again, with its spec; that one "
                                      f"keeps its history. Asked by {who}.")
        workload_event_record(workload=workload, reason="RunAgain",
                              message=f"Run again as '{new.name}' (#{new.pk}) by {who}.")
    return new
