"""Reads for notebooks: what the culler last saw of one, and the GPU-hours reclaim gave back."""
from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from apps.projects.choices import Action, role_allows
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload

from .models import NotebookActivity, NotebookReclaim


def notebook_activity(*, workload: Workload, idle_timeout: int, now: datetime | None = None) -> dict:
    """Idle time, culling deadline and GPU utilisation of a running notebook as the culler last saw
    it (nothing seen yet: counted from its start)."""
    now = now or timezone.now()
    seen = NotebookActivity.objects.filter(workload=workload, attempt=workload.attempt).first()
    running = workload.status == WorkloadStatus.RUNNING
    active_at = seen.active_at if seen else workload.started_at
    deadline = None
    if running and idle_timeout > 0 and active_at is not None:
        deadline = seen.deadline if seen and seen.deadline else active_at + timezone.timedelta(seconds=idle_timeout)
    return {
        "running": running,
        "idle_timeout": idle_timeout,
        "idle_seconds": max(0.0, (now - active_at).total_seconds()) if running and active_at else None,
        "active_at": active_at if running else None,
        "cull_at": deadline,
        "checked_at": seen.checked_at if seen else None,
        "busy_kernels": seen.busy_kernels if seen else None,
        "kernels": seen.kernels if seen else None,
        "connections": seen.connections if seen else None,
        "gpu_utilisation": seen.gpu_utilisation if seen else None,
        "summary": seen.summary if seen else "",
    }


def reclaimed_gpu_hours(*, project_ids: list[int] | None = None, now: datetime | None = None) -> dict[int, dict]:
    """Per project: how many notebooks the culler stopped, and the GPU-hours their GPUs were free
    because of it (from each reclaim until the notebook was started again, or now)."""
    now = now or timezone.now()
    rows = NotebookReclaim.objects.all()
    if project_ids is not None:
        rows = rows.filter(project_id__in=project_ids)
    out: dict[int, dict] = {}
    for project_id, gpus, at, restarted in rows.values_list("project_id", "gpus", "reclaimed_at", "restarted_at"):
        entry = out.setdefault(project_id, {"reclaims": 0, "gpu_hours": 0.0})
        entry["reclaims"] += 1
        entry["gpu_hours"] += gpus * max(0.0, ((restarted or now) - at).total_seconds()) / 3600
    return out


def notebook_endpoint(workload: Workload, *, user, role: str | None) -> str | None:
    """A running notebook's IDE through Cairn's proxy (/nb/<project>/<id>/, apps/notebooks/proxy.py):
    for its creator, and for the project's owners and maintainers when the project shares
    notebooks. The IDE's own token never appears here."""
    creator = workload.created_by_id is not None and workload.created_by_id == user.pk
    if not creator and not (workload.project.shared_notebooks and role_allows(role, Action.OPEN_SHARED_NOTEBOOKS)):
        return None
    ide = workload.spec.get("ide") if isinstance(workload.spec, dict) else None
    return f"/nb/{workload.project.slug}/{workload.pk}/" + ("" if ide == "vscode" else "lab")
