"""What a workload becomes from what its backend observed: decided once, for every backend.

Backends only report what they see (every replica of a stopping workload is gone, every replica
exited with code 0, the attempt failed because of this replica); `decide` turns that, with the
workload's own facts (attempt, restarts allowed, run-time limit, why it was stopping), into a
`Decision`, and `workload_observe` applies it through `workload_transition` (compare-and-set).
The local reconciler (apps/backends/local/reconciler.py, through apps/backends/services.py), the
Slurm one (apps/backends/slurm/reconciler.py) and the Kubernetes reconciler
(apps/backends/kubernetes/reconciler.py) all go through here, so a workload ends the same way
(status, reason, message, exit code) whichever backend ran it.

`decide` is pure (plain dataclasses in, a plain dataclass out): tests/workloads/test_lifecycle.py
drives it table by table.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.db import connection
from django.utils import timezone

from apps.core.outbox import outbox_enqueue

from .choices import EventType, StopCause, WorkloadStatus
from .deadlines import format_duration, run_deadline
from .models import Workload
from .observations import LOST, ReplicaState
from .runtime import Runtime
from .services import conditions_restarted, workload_event_record, workload_finish_at_deadline, workload_transition

S = WorkloadStatus
T = TypeVar("T")

# -- what a backend observes -----------------------------------------------------------------------


def first_failure(failed: list[T], state: Callable[[T], ReplicaState] = lambda item: item) -> T:
    """The replica whose failure is the cause of the attempt's: the first to fail with an exit code
    (replicas lost, or killed by us afterwards, are not), else the first lost."""
    return min(failed, key=lambda item: (state(item).phase == LOST, state(item).finished_at or float("inf"),
                                         state(item).replica))


@dataclass(frozen=True)
class AllGone:
    """Every replica of a STOPPING workload is gone; `killed`: only after a SIGKILL / forced delete;
    `detail`: how they went, when the backend knows better than that."""
    killed: bool = False
    grace_seconds: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class AllSucceeded:
    """Every replica of the attempt exited with code 0."""
    replicas: int


@dataclass(frozen=True)
class AttemptFailed:
    """The attempt failed (gang: one replica is enough); `message` describes the cause ('Replica 1
    exited with code 3.'), `lost`: without an exit code (gone, deleted behind Cairn's back),
    `reason`: the backend's word for it when it has one ('OOMKilled'), else ReplicaFailed."""
    message: str
    exit_code: int | None = None
    lost: bool = False
    reason: str = ""
    # Self-healing (docs/training.md): why Cairn itself ended the attempt (Hung, SlowNode,
    # NodeUnhealthy), and whether the next attempt must run elsewhere (its node is excluded:
    # requeued for the scheduler instead of restarted in place).
    restart_reason: str = ""
    move: bool = False


Observation = AllGone | AllSucceeded | AttemptFailed


@dataclass(frozen=True)
class Facts:
    """What `decide` needs of the workload (see `facts_of`)."""
    attempt: int
    max_restarts: int
    max_runtime_seconds: int | None = None
    past_deadline: bool = False  # its run-time limit has passed (restarts count against it)
    preempted: bool = False  # stopping because the scheduler preempted it
    deadline_exceeded: bool = False  # stopping because it reached its run-time limit
    server_shutdown: bool = False  # stopping because the embedded Cairn server is shutting down
    stop_reason: str = ""  # the reason the stop was asked with, when it is one of kept_stop_reasons
    idle_reclaimed: bool = False  # stopping because the notebook culler found it idle
    # Launches that were not the workload's fault and spend no restart: requeues after a
    # disruption (a drained or lost node: reason Disrupted, the Kubernetes backend).
    free_attempts: int = 0


# -- what happens -----------------------------------------------------------------------------------

REQUEUE, FINISH_AT_DEADLINE, STOP, SUCCEED, RESTART, FAIL, LOSE, MOVE = (
    "requeue", "finish_at_deadline", "stop", "succeed", "restart", "fail", "lose", "move")


@dataclass(frozen=True)
class Decision:
    kind: str  # one of the constants above
    message: str
    reason: str = ""
    to_status: str = ""
    exit_code: int | None = None
    attempt: int | None = None  # RESTART: the attempt to launch
    warning: bool = False  # its event is a Warning


DISRUPTED = "Disrupted"  # requeued after a disruption (drain, preemption, lost node): not a failure
PENDING_TIMEOUT = "PendingTimeout"  # requeued: its pods waited too long for a node (Kubernetes)
HELD_BY_QUEUE = "HeldByQueue"  # requeued: the cluster's admission (Kueue) took its admission back
# Requeues that spend no restart: the workload's code did not fail.
FREE_REQUEUES = (DISRUPTED, PENDING_TIMEOUT, HELD_BY_QUEUE)
SERVER_SHUTDOWN = "ServerShutdown"  # the reason of work stopped by a Ctrl-C of the embedded server
IDLE_RECLAIMED = "IdleReclaimed"  # the reason of a notebook the idle culler stopped (apps/notebooks/culling.py)

# Stop reasons that a stopped workload keeps as its final reason (instead of "Stopped"), filled
# by the apps above at AppConfig.ready(): sweeps adds "Pruned" (a trial stopped early).
kept_stop_reasons: set[str] = set()


def decide(facts: Facts, observation: Observation) -> Decision:
    """The transition (or restart) an observation calls for. Pure."""
    if isinstance(observation, AllGone):
        message = observation.detail or "All replicas have exited."
        if observation.killed and not observation.detail:
            message = f"Replicas were killed after the {observation.grace_seconds:g}s grace period."
        if facts.preempted:  # held its resources until its replicas were gone; back to the queue
            return Decision(REQUEUE, f"Preempted: {message} Back in the queue after attempt {facts.attempt}.",
                            reason="Requeued", to_status=S.QUEUED)
        if facts.deadline_exceeded:  # stopped at its run-time limit: that is a failure
            return Decision(FINISH_AT_DEADLINE, message, to_status=S.FAILED)
        if facts.server_shutdown:
            return Decision(STOP, "Stopped because Cairn (embedded) was shut down; it does not start again with "
                                  "Cairn: resubmit it to run it again.", reason=SERVER_SHUTDOWN, to_status=S.STOPPED,
                            warning=True)
        if facts.idle_reclaimed:
            return Decision(STOP, f"Stopped because it was idle; its files are kept: start it again to go on. "
                                  f"{message}", reason=IDLE_RECLAIMED, to_status=S.STOPPED)
        return Decision(STOP, message, reason=facts.stop_reason or "Stopped", to_status=S.STOPPED)
    if isinstance(observation, AllSucceeded):
        return Decision(SUCCEED, f"All {observation.replicas} replica(s) exited with code 0.", reason="Succeeded",
                        to_status=S.SUCCEEDED, exit_code=0)
    message = observation.message
    restarts_left = facts.attempt - facts.free_attempts <= facts.max_restarts
    if restarts_left and not facts.past_deadline:
        if observation.move:  # off a bad node: the scheduler places attempt n+1 on another one
            return Decision(MOVE, f"{message} Requeued: attempt {facts.attempt + 1} of "
                                  f"{facts.max_restarts + 1 + facts.free_attempts} "
                                  "resumes from the last checkpoint on another node.",
                            reason=observation.restart_reason or "Rescheduled", to_status=S.QUEUED, warning=True)
        return Decision(RESTART, f"{message} Starting attempt {facts.attempt + 1} of "
                                 f"{facts.max_restarts + 1 + facts.free_attempts}"
                                 f"{' from the last checkpoint' if observation.restart_reason else ''}.",
                        reason=observation.restart_reason or "Restarting", attempt=facts.attempt + 1)
    if restarts_left:  # restarts count against the run-time limit (apps/workloads/deadlines.py)
        message += (f" Not restarted: its run-time limit of {format_duration(facts.max_runtime_seconds)} "
                    "has passed.")
    elif facts.max_restarts and not facts.past_deadline:
        message += " No restarts left."
    if observation.lost:
        return Decision(LOSE, message, reason="ReplicaLost", to_status=S.LOST)
    return Decision(FAIL, message, reason=observation.reason or observation.restart_reason or "ReplicaFailed",
                    to_status=S.FAILED, exit_code=observation.exit_code)


def facts_of(workload: Workload) -> Facts:
    deadline = run_deadline(workload)
    return Facts(
        attempt=workload.attempt, max_restarts=workload.max_restarts,
        max_runtime_seconds=workload.max_runtime_seconds,
        past_deadline=deadline is not None and deadline <= timezone.now(),
        preempted=workload.stop_cause == StopCause.PREEMPTED,
        deadline_exceeded=workload.stop_cause == StopCause.DEADLINE,
        server_shutdown=workload.stop_cause == StopCause.SHUTDOWN,
        stop_reason=(workload.status_reason if workload.status == S.STOPPING and workload.stop_cause == StopCause.USER
                     and workload.status_reason in kept_stop_reasons else ""),
        idle_reclaimed=workload.stop_cause == StopCause.IDLE,
        free_attempts=workload.events.filter(reason__in=FREE_REQUEUES, to_status=S.QUEUED).count(),
    )


# -- applying it ------------------------------------------------------------------------------------


class RestartFailed(Exception):
    """Raised by a backend's `relaunch` when the next attempt could not be started (the workload
    then FAILS with reason LaunchFailed)."""


def workload_observe(
    *, workload: Workload, observation: Observation, relaunch: Callable[[int], dict] | None = None,
) -> Decision:
    """Decide what `observation` means for `workload` (row locked by the caller) and do it.

    `relaunch(attempt)` returns the runtime of attempt n+1: started on the backend, or claimed,
    to be started once this transaction commits (the local backend). It is called for a RESTART
    only (a backend observing failures must pass it)."""
    decision = decide(facts_of(workload), observation)
    finished = Runtime.of(workload).replace(alive=False).to_json()
    if decision.kind == REQUEUE:
        workload_transition(
            workload_id=workload.pk, from_statuses={S.STOPPING}, to_status=S.QUEUED, reason=decision.reason,
            message=decision.message, runtime=finished, placement=[],
            stop_cause=StopCause.NONE,
        )
    elif decision.kind == MOVE:
        workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.QUEUED, reason=decision.reason,
            message=decision.message, runtime=finished, placement=[], event_type=EventType.WARNING,
        )
        outbox_enqueue(topic="scheduling.cycle", payload={})
    elif decision.kind == FINISH_AT_DEADLINE:
        workload_finish_at_deadline(workload=workload, message=decision.message)
    elif decision.kind == STOP:
        workload_transition(workload_id=workload.pk, from_statuses={S.STOPPING}, to_status=S.STOPPED,
                            reason=decision.reason, message=decision.message, runtime=finished,
                            event_type=EventType.WARNING if decision.warning else EventType.NORMAL)
    elif decision.kind == SUCCEED:
        workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.SUCCEEDED, reason=decision.reason,
            message=decision.message, exit_code=0, runtime=finished,
        )
    elif decision.kind == RESTART:
        assert relaunch is not None, "a backend reporting failures must be able to relaunch"
        try:
            new_runtime = relaunch(decision.attempt)
        except RestartFailed as exc:
            workload_transition(
                workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.FAILED, reason="LaunchFailed",
                message=f"{observation.message} Could not restart it: {exc}", event_type=EventType.WARNING,
                exit_code=observation.exit_code, runtime=finished,
            )
            return decision
        workload_runtime_save(workload, new_runtime, attempt=decision.attempt, conditions=conditions_restarted(
            workload, attempt=decision.attempt, reason=decision.reason, message=decision.message))
        workload_event_record(workload=workload, reason=decision.reason, type=EventType.WARNING,
                              message=decision.message)
    else:  # FAIL, LOSE
        workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=decision.to_status,
            reason=decision.reason, message=decision.message, event_type=EventType.WARNING,
            runtime=finished, **({"exit_code": decision.exit_code} if decision.kind == FAIL else {}),
        )
    return decision


# -- the helpers both reconcilers hold a workload with -----------------------------------------------


def workload_locked(workload_id: int, *, skip_locked: bool = False) -> Workload | None:
    """The workload with its row locked for the rest of the transaction (None: gone, or busy)."""
    queryset = Workload.objects.select_related("pool__cluster", "project")
    features = connection.features
    if features.has_select_for_update:
        queryset = queryset.select_for_update(
            skip_locked=skip_locked and features.has_select_for_update_skip_locked,
            of=("self",) if features.has_select_for_update_of else (),
        )
    return queryset.filter(pk=workload_id).first()


def workload_runtime_save(workload: Workload, runtime: dict, **fields) -> None:
    """Store the backend's bookkeeping (`runtime`, plus e.g. `attempt`) without a transition."""
    Workload.objects.filter(pk=workload.pk).update(runtime=runtime, updated_at=timezone.now(), **fields)
    workload.runtime = runtime
    for key, value in fields.items():
        setattr(workload, key, value)
