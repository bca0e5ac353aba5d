"""Reads of workloads that other apps ask for through the seams they offer (apps.py)."""
from collections.abc import Iterable

from django.db.models import F, Sum

from .choices import ACTIVE, WorkloadStatus
from .models import Workload


def quota_allocated_rows(project_ids: Iterable[int]) -> list[dict]:
    """For quotas' usage: what the active workloads of these projects hold, summed per (project,
    pool): {"project_id", "pool_id", "gpu", "cpu", "mem"} (milli-GPUs, milli-cores, MiB)."""
    return list(
        Workload.objects.filter(status__in=ACTIVE, project_id__in=set(project_ids))
        .values("project_id", "pool_id")
        .annotate(
            gpu=Sum(F("gpu_milli") * F("replicas")),
            cpu=Sum(F("cpu_milli") * F("replicas")),
            mem=Sum(F("memory_mb") * F("replicas")),
        )
    )


def quota_queued_rows(project_ids: Iterable[int]) -> list[dict]:
    """For quotas' usage: the queued workloads of these projects, one row each: {"project_id",
    "pool_id", "waiting_on", "replicas", "gpu_milli", "cpu_milli", "memory_mb"}."""
    return list(
        Workload.objects.filter(status=WorkloadStatus.QUEUED, project_id__in=set(project_ids))
        .values("project_id", "pool_id", "waiting_on", "replicas", "gpu_milli", "cpu_milli", "memory_mb")
        .order_by()
    )
