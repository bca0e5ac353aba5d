"""Sweep and trial statuses, algorithms and objective directions."""
from django.db import models


class Algorithm(models.TextChoices):
    GRID = "grid", "Grid search"
    RANDOM = "random", "Random search"
    TPE = "tpe", "Tree-structured Parzen estimator"
    # Random search with asynchronous successive halving (early stopping of poor trials).
    ASHA = "asha", "ASHA: random search + successive halving"


class Direction(models.TextChoices):
    MAXIMIZE = "maximize", "Maximize"
    MINIMIZE = "minimize", "Minimize"


class SweepStatus(models.TextChoices):
    RUNNING = "running", "Running"  # the driver asks for trials and follows them
    STOPPING = "stopping", "Stopping"  # stop requested: its running trials are being stopped
    COMPLETED = "completed", "Completed"  # budget used up (or grid exhausted) and every trial ended
    STOPPED = "stopped", "Stopped"
    FAILED = "failed", "Failed"  # the sweep itself could not go on (e.g. its pool is gone)


class TrialStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # asked from Optuna; its workload is queued or about to be
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    PRUNED = "pruned", "Pruned"
    FAILED = "failed", "Failed"
    STOPPED = "stopped", "Stopped"


SWEEP_ACTIVE = frozenset({SweepStatus.RUNNING, SweepStatus.STOPPING})
SWEEP_TERMINAL = frozenset({SweepStatus.COMPLETED, SweepStatus.STOPPED, SweepStatus.FAILED})
TRIAL_ACTIVE = frozenset({TrialStatus.PENDING, TrialStatus.RUNNING})
TRIAL_TERMINAL = frozenset({TrialStatus.SUCCEEDED, TrialStatus.PRUNED, TrialStatus.FAILED, TrialStatus.STOPPED})

PRUNED_REASON = "Pruned"  # the workload status reason (and event reason) of a pruned trial
