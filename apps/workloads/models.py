from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.clusters.models import ResourcePool
from apps.projects.models import Project

from .choices import EventType, Kind, Priority, StopCause, WaitingOn, WorkloadStatus
from .deadlines import MAX_RUNTIME_LIMIT_SECONDS, MIN_RUNTIME_LIMIT_SECONDS


class Workload(models.Model):
    """A notebook, training job or deployment: what was asked (spec) and what happened (status)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="workloads")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=63)
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="workloads")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    # The kind-specific spec as validated by the kind's serializer (command, image, env, ...).
    spec = models.JSONField(default=dict)

    # Scheduling inputs, copied out of the spec so the scheduler can query them.
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.P3)
    preemptible = models.BooleanField(default=True)
    replicas = models.PositiveIntegerField(default=1, validators=[MaxValueValidator(1024)])
    gpu_milli = models.PositiveIntegerField(default=0)  # per replica, 1000 = one GPU
    cpu_milli = models.PositiveIntegerField(default=1000)  # per replica
    memory_mb = models.PositiveBigIntegerField(default=1024)  # per replica
    gpu_model = models.CharField(max_length=100, blank=True)
    # The vendor of the accelerators gpu_milli counts (apps.clusters.choices.AcceleratorType; "":
    # NVIDIA when it asks for any, the short form) and the CPU architectures it may run on
    # ("|"-separated, "": any).
    accelerator_type = models.CharField(max_length=16, blank=True)
    arch = models.CharField(max_length=64, blank=True)
    max_restarts = models.PositiveIntegerField(default=0)
    # Run-time limit of each run, in seconds (null: none); stopped and FAILED (DeadlineExceeded)
    # when it is still running after that long. The rules are in deadlines.py.
    max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        validators=[MinValueValidator(MIN_RUNTIME_LIMIT_SECONDS), MaxValueValidator(MAX_RUNTIME_LIMIT_SECONDS)],
        help_text="Run-time limit in seconds (null: none); a run still going after that long ends failed "
                  "with reason DeadlineExceeded.",
    )

    # Observed state.
    status = models.CharField(max_length=16, choices=WorkloadStatus.choices, default=WorkloadStatus.QUEUED)
    status_reason = models.CharField(max_length=64, blank=True)
    status_message = models.TextField(blank=True)
    pending_reason = models.TextField(blank=True)
    waiting_on = models.CharField(max_length=16, choices=WaitingOn.choices, blank=True)  # pending_reason's kind
    # When the scheduler last wrote pending_reason: its figures (free capacity, a project's usage)
    # are as of then. It rewrites the reason at once when its kind or class changes, and its figures
    # only once they are older than CAIRN_WAIT_REFRESH_SECONDS (docs/scheduling.md, "Wait reasons").
    pending_reason_at = models.DateTimeField(null=True, blank=True)
    # Written by the scheduler for queued workloads: when it expects to start it (when it can
    # tell). Its place in its pool's queue is not on the row: apps.clusters.models.PoolQueue.
    estimated_start = models.DateTimeField(null=True, blank=True)
    # Delay scheduling: when the scheduler first held it back for a node holding its data (its bound
    # counts from then; cleared when it is admitted, so a requeued workload gets a bound again).
    locality_since = models.DateTimeField(null=True, blank=True)
    preemptions = models.PositiveIntegerField(default=0)  # times it was preempted and requeued
    exit_code = models.IntegerField(null=True, blank=True)
    conditions = models.JSONField(default=list, blank=True)
    placement = models.JSONField(default=list, blank=True)  # one entry per replica: {"node": ..., ...}
    # The nodes it may run on, set by its backend from what pins it (a notebook's home volume bound
    # to a zone: its PersistentVolume's node affinity): Kubernetes nodeSelectorTerms, any term
    # matching, every expression of a term (apps/clusters/affinity.py). Empty: any node.
    node_affinity = models.JSONField(default=list, blank=True)
    attempt = models.PositiveIntegerField(default=0)  # launches so far; restarts = attempt - 1
    runtime = models.JSONField(default=dict, blank=True)  # backend bookkeeping (e.g. notebook URL)
    # What drives the end of STOPPING (apps/workloads/lifecycle.py facts_of): why it stops, who
    # preempted it, and the stop escalation (SIGTERM sent, SIGKILL sent). Reset at each dispatch.
    stop_cause = models.CharField(max_length=16, choices=StopCause.choices, blank=True, default=StopCause.NONE)
    preempted_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    term_sent_at = models.DateTimeField(null=True, blank=True)
    kill_sent_at = models.DateTimeField(null=True, blank=True)
    # "Run again" (apps/workloads/resubmission.py): the ended workload this one runs again, with
    # the same spec; the old one keeps its own history (events, logs, runs).
    resubmitted_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="resubmissions")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="workload_unique_name")]
        indexes = [
            models.Index(fields=["status", "priority", "created_at"]),
            models.Index(fields=["project", "kind", "-created_at"]),
            # The scheduler reads the work that ended recently (apps.scheduling.services.project_service).
            models.Index(fields=["finished_at"], name="workload_finished_at"),
        ]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"

    @property
    def restarts(self) -> int:
        return max(self.attempt - 1, 0)


class WorkloadEvent(models.Model):
    """Audit trail: every transition and decision about a workload, in order."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    created_at = models.DateTimeField(auto_now_add=True)
    type = models.CharField(max_length=8, choices=EventType.choices, default=EventType.NORMAL)
    reason = models.CharField(max_length=64)
    message = models.TextField(blank=True)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    # A diagnosis kept with the event, e.g. the Python stacks of a hung training job's ranks.
    attachment = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workload", "created_at"])]
