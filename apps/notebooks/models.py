from django.db import models

from apps.projects.models import Project
from apps.workloads.models import Workload


class NotebookActivity(models.Model):
    """What the idle culler last saw of a running notebook (one row per notebook, rewritten each
    pass; apps/notebooks/culling.py decides from it)."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, primary_key=True, related_name="+")
    attempt = models.PositiveIntegerField(default=0)  # the attempt it describes (a new start resets it)
    checked_at = models.DateTimeField()
    active_at = models.DateTimeField()  # last moment it counted as active (or its start)
    deadline = models.DateTimeField(null=True, blank=True)  # when it is stopped if it stays idle; null: never
    busy_kernels = models.PositiveIntegerField(default=0)
    kernels = models.PositiveIntegerField(default=0)
    connections = models.PositiveIntegerField(default=0)
    gpu_utilisation = models.FloatField(null=True, blank=True)  # percent; null: no telemetry
    reached = models.BooleanField(default=False)
    summary = models.CharField(max_length=300, blank=True)


class NotebookReclaim(models.Model):
    """A notebook the culler stopped: its GPUs went back to the pool until it was started again."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    workload = models.ForeignKey(Workload, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    reclaimed_at = models.DateTimeField()
    gpus = models.FloatField()  # GPUs it held (gpu_milli / 1000)
    idle_seconds = models.FloatField()
    restarted_at = models.DateTimeField(null=True, blank=True)  # "Start again"; null: still stopped

    class Meta:
        indexes = [models.Index(fields=["project", "reclaimed_at"], name="notebook_reclaim_project")]
        ordering = ["-reclaimed_at"]
