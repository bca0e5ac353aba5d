"""Writes to quotas and the usage ledger."""
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError
from apps.projects.models import Project

from .models import Quota, UsageRecord


def quota_create(*, project: Project, **fields) -> Quota:
    try:
        with transaction.atomic():
            quota = Quota.objects.create(project=project, **fields)
            audit_record(action=AuditAction.QUOTA_CREATE, project=project, target=quota,
                         details={"pool": quota.pool.name, **_settings(quota)})
            return quota
    except IntegrityError:
        raise ConflictError(f"Project '{project.slug}' already has a quota on pool '{fields['pool']}'.") from None


def quota_update(*, quota: Quota, **fields) -> Quota:
    for key, value in fields.items():
        setattr(quota, key, value)
    with transaction.atomic():
        # The stored values, not the instance's: the admin's form has already written into it.
        before = _settings(Quota.objects.select_for_update().get(pk=quota.pk))
        quota.save()
        after = _settings(quota)
        changed = {key: {"from": before[key], "to": after[key]} for key in after if before.get(key) != after[key]}
        if changed:
            audit_record(action=AuditAction.QUOTA_CHANGE, project=quota.project, target=quota,
                         details={"pool": quota.pool.name, "changed": changed})
    return quota


# Apps above quotas whose work holds a quota register a check here at AppConfig.ready():
# check(quota) raises ConflictError while the quota's project still has unfinished work of theirs
# on its pool. (quotas sits below workloads and may not import it.)
quota_delete_checks: list[Callable[[Quota], None]] = []


def quota_delete(*, quota: Quota) -> None:
    for check in quota_delete_checks:
        check(quota)
    with transaction.atomic():
        audit_record(action=AuditAction.QUOTA_DELETE, project=quota.project, target=quota,
                     details={"pool": quota.pool.name, **_settings(quota)})
        quota.delete()


# The quota's limits, as the audit log shows them.
_AUDITED = ("nominal_gpu_milli", "nominal_cpu_milli", "nominal_memory_mb", "borrowing_limit_gpu_milli",
            "lending_limit_gpu_milli", "gpu_hour_budget", "budget_period")


def _settings(quota: Quota) -> dict:
    values = {}
    for name in _AUDITED:
        value = getattr(quota, name)
        values[name] = None if value is None else (format(Decimal(str(value)).normalize(), "f") if name == "gpu_hour_budget"
                                                       else value)
    return values


def usage_open(*, workload, at: datetime | None = None) -> UsageRecord:
    """Start charging a workload's allocation at `at` (default now): opens its allocation
    interval, or returns the one already open (idempotent: never two open intervals at once)."""
    fields = {
        "project_id": workload.project_id,
        "pool_id": workload.pool_id,
        "attempt": workload.attempt,
        "gpu_milli": workload.gpu_milli * workload.replicas,
        "cpu_milli": workload.cpu_milli * workload.replicas,
        "memory_mb": workload.memory_mb * workload.replicas,
        "started_at": at or timezone.now(),
    }
    for _ in range(2):
        current = UsageRecord.objects.filter(workload=workload, ended_at__isnull=True).first()
        if current is not None:
            return current
        try:
            with transaction.atomic():  # a savepoint: a racing opener's row wins, we read it back
                return UsageRecord.objects.create(workload=workload, **fields)
        except IntegrityError:
            continue
    raise ConflictError(f"Could not open the usage interval of workload {workload.pk}.")


def usage_start_later(*, workload, at: datetime) -> int:
    """Charge the workload's open interval from `at` instead of its admission (its replicas began
    running then: a cluster's own queue held them meanwhile). Returns how many rows moved."""
    return UsageRecord.objects.filter(workload=workload, ended_at__isnull=True, started_at__lt=at).update(started_at=at)


def usage_close(*, workload, at: datetime | None = None) -> int:
    """Stop charging at `at` (default now): close the workload's open interval. Returns how many
    rows it closed (0 when nothing was open)."""
    return UsageRecord.objects.filter(workload=workload, ended_at__isnull=True).update(ended_at=at or timezone.now())
