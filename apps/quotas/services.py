"""Writes to quotas and the usage ledger."""
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.errors import ConflictError
from apps.projects.models import Project

from .models import Quota, UsageRecord


def quota_create(*, project: Project, **fields) -> Quota:
    try:
        with transaction.atomic():
            return Quota.objects.create(project=project, **fields)
    except IntegrityError:
        raise ConflictError(f"Project '{project.slug}' already has a quota on pool '{fields['pool']}'.") from None


def quota_update(*, quota: Quota, **fields) -> Quota:
    for key, value in fields.items():
        setattr(quota, key, value)
    quota.save()
    return quota


def quota_delete(*, quota: Quota) -> None:
    from apps.workloads.choices import TERMINAL

    if quota.project.workloads.filter(pool=quota.pool).exclude(status__in=TERMINAL).exists():
        raise ConflictError("Workloads of this project are still queued or running on this pool; stop them first.")
    quota.delete()


def usage_open(*, workload) -> None:
    """Start charging a workload's allocation (idempotent per attempt)."""
    UsageRecord.objects.get_or_create(
        workload=workload,
        attempt=workload.attempt,
        defaults={
            "project_id": workload.project_id,
            "pool_id": workload.pool_id,
            "gpu_milli": workload.gpu_milli * workload.replicas,
            "cpu_milli": workload.cpu_milli * workload.replicas,
            "memory_mb": workload.memory_mb * workload.replicas,
            "started_at": timezone.now(),
        },
    )


def usage_close(*, workload) -> None:
    """Stop charging: close every open record of the workload."""
    UsageRecord.objects.filter(workload=workload, ended_at__isnull=True).update(ended_at=timezone.now())
