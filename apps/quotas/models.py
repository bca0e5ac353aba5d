from django.core.validators import MinValueValidator
from django.db import models

from apps.clusters.models import ResourcePool
from apps.projects.models import Project


class BudgetPeriod(models.TextChoices):
    DAY = "day", "Day"
    WEEK = "week", "Week"
    MONTH = "month", "Month"


class Quota(models.Model):
    """What a project may use in one pool. GPU amounts are in milli-GPU (1000 = one GPU).

    `nominal_*` is guaranteed. Borrowing and lending limits (milli-GPU) are used by the full
    scheduler; a null limit means "no limit".
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quotas")
    pool = models.ForeignKey(ResourcePool, on_delete=models.CASCADE, related_name="quotas")
    # verbose names: the admin's labels ("Gpu hour budget" otherwise)
    nominal_gpu_milli = models.PositiveIntegerField("nominal GPUs (milli-GPU)", default=0)
    nominal_cpu_milli = models.PositiveIntegerField("nominal CPUs (milli-CPU)", default=0)
    nominal_memory_mb = models.PositiveBigIntegerField("nominal memory (MB)", default=0)
    borrowing_limit_gpu_milli = models.PositiveIntegerField("GPU borrowing limit (milli-GPU)", null=True, blank=True)
    lending_limit_gpu_milli = models.PositiveIntegerField("GPU lending limit (milli-GPU)", null=True, blank=True)
    gpu_hour_budget = models.DecimalField(
        "GPU-hour budget", max_digits=12, decimal_places=2, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    budget_period = models.CharField(max_length=8, choices=BudgetPeriod.choices, default=BudgetPeriod.MONTH)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "pool"]
        constraints = [models.UniqueConstraint(fields=["project", "pool"], name="quota_unique_project_pool")]

    def __str__(self) -> str:
        return f"{self.project} @ {self.pool}"


class UsageRecord(models.Model):
    """Ledger of allocated resource-seconds: one row per allocation interval of a workload, from
    its admission to the release of its resources (finished, stopped, or requeued after a
    preemption). A workload admitted n times has n rows, never two open at once; `attempt` is
    the workload's attempt count when the interval opened (informative only: several intervals
    may share it, e.g. when a workload is preempted before its next launch)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="usage_records")
    pool = models.ForeignKey(ResourcePool, on_delete=models.CASCADE, related_name="usage_records")
    workload = models.ForeignKey("workloads.Workload", on_delete=models.SET_NULL, null=True, related_name="usage_records")
    attempt = models.PositiveIntegerField(default=0)
    gpu_milli = models.PositiveIntegerField(default=0)
    cpu_milli = models.PositiveIntegerField(default=0)
    memory_mb = models.PositiveBigIntegerField(default=0)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["project", "pool", "started_at"]),
            # Open and recently closed intervals (the scheduler's apps.scheduling.services.project_service).
            models.Index(fields=["ended_at"], name="usage_ended_at"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["workload"], condition=models.Q(ended_at__isnull=True),
                                    name="usage_one_open_interval_per_workload"),
        ]
