"""What Cairn knows of a training job's progress: the checkpoints its SDK reported and the last
step each rank reached (docs/training.md). Written by the tracking ingestion (run tokens), read
by the reconcilers (hangs, stragglers) and the workload page (timeline, goodput)."""
from django.db import models

from apps.workloads.models import Workload


class Checkpoint(models.Model):
    """A checkpoint `cairn.checkpoint.save()` persisted and reported (step, size, timings)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="checkpoints")
    attempt = models.PositiveIntegerField()
    replica = models.PositiveIntegerField(default=0)
    step = models.BigIntegerField()
    name = models.CharField(max_length=64, blank=True)  # the step-<n> folder
    size_bytes = models.BigIntegerField()
    save_seconds = models.FloatField()  # from save() to persisted
    blocking_seconds = models.FloatField()  # how long training waited
    two_stage = models.BooleanField(default=False)
    sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workload", "-created_at"])]


class ReplicaProgress(models.Model):
    """The last step one rank reported in one workload (its current attempt), with its recent step
    times: what hang and straggler detection read."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="replica_progress")
    replica = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    step = models.BigIntegerField()
    step_seconds = models.FloatField(null=True, blank=True)  # the latest step's duration
    done = models.BooleanField(default=False)  # the rank called cairn.finish(): shutting down, not hung
    recent = models.JSONField(default=list, blank=True)  # [[step, seconds], ...] newest last, bounded
    first_reported_at = models.DateTimeField()  # in this attempt
    step_changed_at = models.DateTimeField()  # when `step` last moved
    reported_at = models.DateTimeField()

    class Meta:
        ordering = ["workload", "replica"]
        constraints = [models.UniqueConstraint(fields=["workload", "replica"], name="replicaprogress_unique")]


class AttemptProgress(models.Model):
    """When each attempt of a training job first reported a step: the end of its start-up (launch,
    rendezvous, loading the checkpoint), for goodput."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="attempt_progress")
    attempt = models.PositiveIntegerField()
    first_step = models.BigIntegerField()
    first_step_at = models.DateTimeField()

    class Meta:
        ordering = ["workload", "attempt"]
        constraints = [models.UniqueConstraint(fields=["workload", "attempt"], name="attemptprogress_unique")]
