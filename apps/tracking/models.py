import hashlib
import hmac
import secrets

from django.conf import settings
from django.db import models

from apps.projects.models import Project
from apps.workloads.models import Workload

from .choices import RunStatus

RUN_TOKEN_PREFIX = "cairnrun_"


class Run(models.Model):
    """One tracked execution: a workload attempt (made by the backend at launch) or standalone
    (made by `cairn.init()` on a laptop). Holds params, metric series and their summaries."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    workload = models.ForeignKey(Workload, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    attempt = models.PositiveIntegerField(null=True, blank=True)
    name = models.CharField(max_length=200)
    # Chosen by the SDK so that a retried "create run" never makes two runs.
    client_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "client_id"], name="run_unique_client_id"),
            models.UniqueConstraint(fields=["workload", "attempt"], name="run_unique_workload_attempt"),
        ]
        indexes = [models.Index(fields=["project", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.project_id}/{self.name}#{self.pk}"


class RunToken(models.Model):
    """A write-only token for one run: `cairnrun_<prefix>_<secret>`. Only a hash is stored.

    It can post metric batches, params and the final status of its run, nothing else: the
    general API authentication does not even recognise it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tokens")
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @staticmethod
    def generate() -> tuple[str, str, str]:
        prefix = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        return prefix, secret, f"{RUN_TOKEN_PREFIX}{prefix}_{secret}"

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, self.hash_secret(secret))


class Param(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="params")
    key = models.CharField(max_length=200)
    value = models.JSONField()  # str, number, bool or null

    class Meta:
        ordering = ["key"]
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="param_unique_key")]


class MetricChunk(models.Model):
    """The points of one key that one batch stored, sorted by step, packed in columns:
    little-endian int64 steps, float64 values and float64 Unix times (`count` of each).

    One row per key and batch instead of one per point: ingestion writes a few rows and index
    entries per batch, and a raw read decodes whole columns at once (see apps.tracking.points).
    Batches may overlap in steps; reads order points by (step, chunk id, position)."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=200)
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    count = models.PositiveIntegerField()
    step_data = models.BinaryField()
    value_data = models.BinaryField()
    time_data = models.BinaryField()

    class Meta:
        indexes = [
            # Chunks overlapping [lo, hi]: last_step >= lo scanned in the index, first_step <= hi filtered there.
            models.Index(fields=["run", "key", "last_step", "first_step"], name="metricchunk_run_key_last"),
        ]


class MetricSummary(models.Model):
    """Per run and key: count, min, max and the value at the highest step. Upserted per batch."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="summaries")
    key = models.CharField(max_length=200)
    count = models.BigIntegerField()
    min = models.FloatField()
    max = models.FloatField()
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    last_value = models.FloatField()
    last_time = models.DateTimeField()

    class Meta:
        ordering = ["key"]
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="metricsummary_unique_key")]


class MetricRollup(models.Model):
    """Aggregate of the points of one key whose step falls in block `bucket` of width 16**level.

    Keeps the first, last, min and max points (with their steps), so any downsampled read built
    from whole blocks keeps every spike. Upserted per batch, merged with LEAST/GREATEST-style updates."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=200)
    level = models.PositiveSmallIntegerField()
    bucket = models.BigIntegerField()
    count = models.BigIntegerField()
    first_step = models.BigIntegerField()
    first_value = models.FloatField()
    last_step = models.BigIntegerField()
    last_value = models.FloatField()
    min_step = models.BigIntegerField()
    min_value = models.FloatField()
    max_step = models.BigIntegerField()
    max_value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key", "level", "bucket"], name="metricrollup_unique_bucket"),
        ]


class IngestBatch(models.Model):
    """Batch ids already stored for a run: a retried batch is acknowledged, not stored twice."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    batch_id = models.CharField(max_length=64)
    points = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "batch_id"], name="ingestbatch_unique_id")]
        # Retention (services.tracking_prune_batch_ids) deletes by age.
        indexes = [models.Index(fields=["created_at"], name="ingestbatch_created")]
