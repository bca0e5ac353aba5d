from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.clusters.models import ResourcePool
from apps.projects.models import Project
from apps.workloads.choices import Priority
from apps.workloads.models import Workload

from .choices import Algorithm, Direction, SweepStatus, TrialStatus


class Sweep(models.Model):
    """A hyper-parameter search in a project: trials are training workloads made from `template`
    with parameters Optuna samples from `space` (apps/sweeps/space.py), judged by `objective_key`.

    Optuna's own state (its study, trials, intermediate values) lives in Cairn's database through
    its RDB storage, under `study_name`; the Trial rows below link its trials to workloads."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sweeps")
    name = models.CharField(max_length=50)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="+")
    # The training job each trial runs: the validated body of POST /training-jobs/ (no name).
    template = models.JSONField(default=dict)
    space = models.JSONField(default=dict)
    objective_key = models.CharField(max_length=200)
    direction = models.CharField(max_length=8, choices=Direction.choices, default=Direction.MAXIMIZE)
    algorithm = models.CharField(max_length=8, choices=Algorithm.choices, default=Algorithm.RANDOM)
    # ASHA: the first rung's step and the reduction factor (rungs at min_resource * rf**k).
    min_resource = models.PositiveIntegerField(default=1)
    reduction_factor = models.PositiveIntegerField(default=3, validators=[MinValueValidator(2)])
    seed = models.BigIntegerField(null=True, blank=True)
    max_trials = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max_gpu_hours = models.FloatField(null=True, blank=True)
    max_concurrent = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(1000)])
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.P4)

    status = models.CharField(max_length=16, choices=SweepStatus.choices, default=SweepStatus.RUNNING)
    status_message = models.TextField(blank=True)
    study_name = models.CharField(max_length=100, unique=True)
    # The driver that works on it holds a lease (one driver per sweep at a time, any database).
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="sweep_unique_name")]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


class Trial(models.Model):
    """One Optuna trial of a sweep and the workload that runs it (one each: the link is unique)."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()  # Optuna's trial number in the study: 0, 1, 2, ...
    optuna_trial_id = models.BigIntegerField()
    params = models.JSONField(default=dict)
    workload = models.OneToOneField(Workload, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="sweep_trial")
    status = models.CharField(max_length=16, choices=TrialStatus.choices, default=TrialStatus.PENDING)
    message = models.TextField(blank=True)
    objective = models.FloatField(null=True, blank=True)
    # Intermediate values reported to Optuna so far: the last step and its value.
    last_step = models.BigIntegerField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)
    pruned_step = models.BigIntegerField(null=True, blank=True)
    pruned_rung = models.PositiveIntegerField(null=True, blank=True)
    told = models.BooleanField(default=False)  # Optuna knows how it ended
    # Times it was submitted again because Cairn (embedded) shut down under it.
    resubmits = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["sweep", "number"], name="trial_unique_number")]
        indexes = [models.Index(fields=["sweep", "status"])]

    def __str__(self) -> str:
        return f"{self.sweep}#{self.number}"
