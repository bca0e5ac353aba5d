"""Workload kinds, statuses and the transition table every status change goes through."""
from django.db import models


class Kind(models.TextChoices):
    TRAINING = "training", "Training job"
    NOTEBOOK = "notebook", "Notebook"
    DEPLOYMENT = "deployment", "Deployment"


class WorkloadStatus(models.TextChoices):
    QUEUED = "queued", "Queued"  # waiting for the scheduler (quota, capacity)
    ADMITTED = "admitted", "Admitted"  # placed; the backend is starting it
    RUNNING = "running", "Running"
    STOPPING = "stopping", "Stopping"  # stop requested; waiting for replicas to exit
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    STOPPED = "stopped", "Stopped"
    LOST = "lost", "Lost"  # the backend lost track of it and could not recover it


class WaitingOn(models.TextChoices):
    """What a queued workload waits on, as the scheduler last decided (its pending_reason says it
    for people). The same values as apps/scheduling/policy/ WaitKind."""

    CONSTRAINT = "constraint", "No node with an allowed GPU model"
    CAPACITY = "capacity", "Capacity: no place fits it now"
    BUDGET = "budget", "Its project's GPU-hour budget"
    RESERVED = "reserved", "Capacity reserved for it as running work ends"
    PREEMPTING = "preempting", "The workloads it preempted to exit"
    QUOTA_LIMIT = "quota_limit", "Quota: its project's borrowing limit"
    QUOTA_LENT = "quota_lent", "Quota: its nominal, lent to other projects"
    QUOTA_LENDABLE = "quota_lendable", "Quota: nothing left to borrow"
    QUOTA_NONE = "quota_none", "Quota: none on the pool"
    NEVER_FITS = "never_fits", "No node of its pool can ever run it"
    LOCALITY = "locality", "A node holding its data (a bounded wait)"


class StopCause(models.TextChoices):
    """Why a workload is stopping (or last stopped): what its end of STOPPING means."""

    NONE = "", "None"
    USER = "user", "Stopped by a user"
    PREEMPTED = "preempted", "Preempted by the scheduler (requeued once its replicas exit)"
    DEADLINE = "deadline", "Reached its run-time limit (fails once its replicas exit)"
    SHUTDOWN = "shutdown", "The embedded Cairn server is shutting down"
    IDLE = "idle", "Idle: stopped by the notebook culler (ends STOPPED with reason IdleReclaimed)"


S = WorkloadStatus

TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.STOPPED, S.LOST})
ACTIVE = frozenset({S.ADMITTED, S.RUNNING, S.STOPPING})  # holds resources

TRANSITIONS: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.ADMITTED, S.STOPPED, S.FAILED}),
    # ADMITTED -> QUEUED: requeued (preempted, or the backend could not start it yet).
    S.ADMITTED: frozenset({S.RUNNING, S.STOPPING, S.SUCCEEDED, S.FAILED, S.LOST, S.QUEUED}),
    S.RUNNING: frozenset({S.STOPPING, S.SUCCEEDED, S.FAILED, S.LOST, S.QUEUED, S.ADMITTED}),
    # STOPPING -> QUEUED: a preempted workload whose replicas have exited after their grace
    # period goes back to the queue (it held its resources while stopping).
    S.STOPPING: frozenset({S.STOPPED, S.SUCCEEDED, S.FAILED, S.LOST, S.QUEUED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    # STOPPED -> QUEUED: a stopped notebook started again (apps.notebooks.services.notebook_start),
    # with its home folder kept; other kinds are resubmitted instead.
    S.STOPPED: frozenset({S.QUEUED}),
    S.LOST: frozenset(),
}


def can_transition(current: str, new: str) -> bool:
    return new in TRANSITIONS.get(current, frozenset())


class Priority(models.IntegerChoices):
    P0 = 0, "P0 (highest)"
    P1 = 1, "P1"
    P2 = 2, "P2"
    P3 = 3, "P3"
    P4 = 4, "P4"
    P5 = 5, "P5 (lowest)"


class EventType(models.TextChoices):
    NORMAL = "Normal", "Normal"
    WARNING = "Warning", "Warning"
