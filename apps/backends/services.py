"""The steps every reconciler shares: dispatch, the launch claim, stop and its escalation, the
reading of a running attempt (gang failure, run-time limit, self-healing), restarts.

- `workload_dispatch`: ADMITTED -> claim attempt n+1 -> launch its replicas -> RUNNING (idempotent).
- `workload_stop_signal`: SIGTERM the replicas of a STOPPING workload, once.
- `workload_reconcile`: one level-triggered look at one active workload (row locked): stop
  escalation (SIGTERM, SIGKILL after the grace period, STOPPED / requeued when all are gone),
  the attempt's failure (gang: the first replica to fail ends it), restarts after the backoff
  (claimed like a dispatch, launched after the claim commits), the run-time limit.
- `workload_stop_step` / `stop_escalate`: the stop protocol every reconciler calls with what it
  sees (local, Slurm and Kubernetes alike): SIGTERM once, SIGKILL after the grace period (again
  every grace period), then STOPPED / QUEUED through `workload_observe(AllGone)`.
- `workload_restart_launch`: a restart decided earlier (Kubernetes waits for the failed attempt's
  pods to be gone) claimed and launched like a dispatch.
- `reconcile_workloads`: a pass over a backend's workloads (a queryset): active ones through
  `workload_reconcile` (or the backend's own step around it), ADMITTED ones dispatched when their
  dispatch was lost, inactive ones whose replicas still run stopped.

A backend's reconciler (apps/backends/<name>/reconciler.py) decides which workloads are its own
and what it does besides (the local one adopts replicas of a dead Cairn process and stops its
work on shutdown; the Slurm one keeps the node inventory). Every decision about one workload is
taken while holding its row lock, so a dispatch task, a stop task and the reconcilers never act
on the same workload at once; status changes go through `workload_transition` (compare-and-set).

`workload.runtime` is the bookkeeping of the current attempt:
    {"backend", "attempt", "replicas": [...], "alive",
     "owner": the Cairn process managing it, "failure": the replica failure being handled,
     "launching": the claim of an attempt being started (a dispatch, or a restart),
     plus what the backend keeps ("job" for Slurm, "pid"s locally) and "url"/"token"/"endpoints"}
Why it is stopping and the stop escalation are typed fields of the workload (`stop_cause`,
`preempted_by`, `term_sent_at`, `kill_sent_at`), reset at each dispatch.
"""
from __future__ import annotations

import itertools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps.storage.services import dataset_versions_drift
from apps.workloads.choices import ACTIVE, EventType, StopCause, WorkloadStatus
from apps.workloads.deadlines import run_deadline
from apps.workloads.kinds import kind_spec
from apps.workloads.lifecycle import (
    AllGone,
    AllSucceeded,
    AttemptFailed,
    first_failure,
    workload_locked,
    workload_observe,
    workload_runtime_save,
)
from apps.workloads.models import Workload
from apps.workloads.services import (
    workload_event_record,
    workload_stop_at_deadline,
    workload_transition,
)

from .base import LOST, Backend, BackendUnavailable, LaunchError, ReplicaScaling, ReplicaState, backend_for
from .healing import training_health_failure
from .identity import identity_alive, process_identity
from .launch_env import attempt_env
from .scaling import replicas_serve
from .wakeup import reconciler_wakeup

logger = logging.getLogger(__name__)
S = WorkloadStatus


def _grace_seconds() -> float:
    return float(settings.CAIRN["STOP_GRACE_SECONDS"])


_identity: dict | None = None


def _me() -> dict:
    """This Cairn process (recomputed after a fork: Celery workers are forked)."""
    global _identity
    if _identity is None or _identity["pid"] != os.getpid():
        _identity = process_identity()
    return _identity


def _is_me(identity: dict | None) -> bool:
    me = _me()
    return bool(identity) and identity.get("pid") == me["pid"] and abs(
        (identity.get("create_time") or 0) - me["create_time"]
    ) < 0.05


def _save_locked(workload: Workload) -> Callable[..., bool]:
    """How the shared steps write a workload whose row the caller holds locked."""
    def save(runtime: dict, **fields) -> bool:
        workload_runtime_save(workload, runtime, **fields)
        return True
    return save


def stop_escalate(workload: Workload, backend: Backend, *, save: Callable[..., bool] | None = None) -> bool:
    """The stop escalation of every backend, for a workload whose replicas are still alive: SIGTERM
    once (`term_sent_at`), SIGKILL (`signal(force=True)`) once the grace period has passed, sent
    again every grace period while any replica is left (`kill_sent_at`, the last one).

    `save(runtime, **fields)` records the times: by default under the caller's row lock; the
    Kubernetes reconciler passes its compare-and-set (no API call under a lock). True when it
    signalled."""
    save = save or _save_locked(workload)
    runtime = workload.runtime or {}
    now = timezone.now()
    if workload.term_sent_at is None:
        backend.signal(workload)
        save(runtime, term_sent_at=now)
        return True
    if (now - (workload.kill_sent_at or workload.term_sent_at)).total_seconds() >= _grace_seconds():
        backend.signal(workload, force=True)
        save(runtime, kill_sent_at=now)
        return True
    return False


def workload_stop_step(workload: Workload, backend: Backend, *, alive: bool,
                       save: Callable[..., bool] | None = None,
                       observe: Callable[[AllGone], object] | None = None) -> bool:
    """One look at a STOPPING workload, or at an inactive one whose replicas may still run
    (requeued, finished elsewhere), given whether any replica of it is `alive`: escalate
    (`stop_escalate`) while one is; once none is, a STOPPING workload is settled by
    `workload_observe(AllGone)` (STOPPED, or QUEUED when it was preempted) and another one's
    runtime marked not alive. Every backend's reconciler stops through it, so the states and
    events are the same everywhere. `save` as for `stop_escalate`; `observe(observation)` applies
    the outcome (by default `workload_observe` under the caller's row lock) and returns None
    when it could not. True when it acted."""
    save = save or _save_locked(workload)
    if alive:
        stop_escalate(workload, backend, save=save)
        return True
    if workload.status == S.STOPPING:
        observation = AllGone(killed=workload.kill_sent_at is not None, grace_seconds=_grace_seconds())
        if observe is None:
            workload_observe(workload=workload, observation=observation)
            return True
        return observe(observation) is not None
    runtime = workload.runtime or {}
    if runtime.get("alive"):
        return save({**runtime, "alive": False})
    return False


# -- dispatch ------------------------------------------------------------------------------------

# A new attempt starts with none of the last stop's facts (they were runtime keys, replaced here).
_STOP_RESET = {"stop_cause": StopCause.NONE, "preempted_by": None, "term_sent_at": None, "kill_sent_at": None}

def workload_dispatch(*, workload_id: int, skip_locked: bool = False) -> Workload | None:
    """Start an ADMITTED workload: claim attempt n+1, launch its replicas, ADMITTED -> RUNNING.

    Launched at most once per attempt, whatever is killed when. The claim (the attempt number,
    the attempt's run and run token, who is launching) is committed *before* any replica starts;
    the launch then runs under the row lock and commits RUNNING. A dispatcher killed in between
    leaves a claim whose owner is gone: the next delivery or the reconciler resumes *the same
    attempt*, and the backend adopts every replica of it that already started (the local backend
    by its launch records and the processes tagged with the attempt, Kubernetes by the objects'
    deterministic names) and starts only the missing ones. A second delivery while the first is
    launching waits for the row lock, then finds RUNNING and does nothing. A cluster whose backend
    is not available fails the workload with reason BackendUnavailable.

    `skip_locked`: the reconciler's way in, which passes over a workload someone is launching.
    """
    claim = None
    try:
        with transaction.atomic():
            workload = workload_locked(workload_id, skip_locked=skip_locked)
            if workload is None or workload.status != S.ADMITTED:
                return workload
            claim = _claim_attempt(workload)
            if not isinstance(claim, dict):
                return claim or workload
        # The claim is committed: from here on, a crash leaves a record of what was being started.
        # The claim is ours, so we wait for the row lock (never skip it): a claim left unlaunched
        # because someone held the row for a moment would keep every other dispatcher away for
        # LAUNCH_CLAIM_TIMEOUT (a trial of a sweep stayed ADMITTED for minutes so).
        try:
            with transaction.atomic():
                workload = workload_locked(workload_id)
                if workload is None:
                    return None
                current = (workload.runtime or {}).get("launching") or {}
                if workload.status != S.ADMITTED or current.get("token") != claim["token"]:
                    return workload  # stopped, requeued or taken over meanwhile: not ours to start any more
                return _launch_claimed(workload, claim) or workload
        except Exception:
            _release_claim(workload_id, claim)  # a transient failure: the retry resumes it at once
            raise
    finally:
        if isinstance(claim, dict):
            _launching_here.discard(claim["token"])


def _release_claim(workload_id: int, claim: dict) -> None:
    """Mark our claim as nobody's, so that the next try resumes the attempt without waiting."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        runtime = (workload.runtime or {}) if workload is not None else {}
        current = runtime.get("launching") or {}
        if current.get("token") == claim["token"]:
            workload_runtime_save(workload, {**runtime, "launching": {**current, "owner": None}})


# A live dispatcher launches under the row lock, so whoever gets the lock while a claim of another
# process is older than CLAIM_GRACE knows it is not being launched (that process lost its database
# connection, say, and cannot finish): take it over. Within one process (embedded mode, SQLite:
# no row locks) only after LAUNCH_CLAIM_TIMEOUT, as the claim's thread may still be launching.
CLAIM_GRACE = 10.0
LAUNCH_CLAIM_TIMEOUT = 300.0

# The claims a thread of this process is launching right now (their tokens). A claim of this
# process that is not among them was left behind: its launch failed and could not release it
# (the database went away mid-launch), so it is resumed at once, not after LAUNCH_CLAIM_TIMEOUT.
# (A PostgreSQL restart in the chaos run left one so: the reconciler, its own claimer, waited.)
_launching_here: set[str] = set()


def _claim_token() -> str:
    """A new claim's token, registered as being launched by this process until discarded."""
    token = secrets.token_hex(8)
    _launching_here.add(token)
    return token


def _claim_attempt(workload: Workload) -> dict | Workload | None:
    """Claim the attempt to launch (row locked): a fresh one, or an interrupted one to resume.

    Returns the claim, or the workload once it changed status, or None to wait (its previous
    replicas are still exiting, or someone else is launching it right now)."""
    try:
        backend = backend_for(workload)
    except BackendUnavailable as exc:
        return workload_transition(
            workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.FAILED,
            reason="BackendUnavailable", message=str(exc), event_type=EventType.WARNING,
        )
    runtime = workload.runtime or {}
    previous = runtime.get("launching")
    if previous and previous.get("placement") != workload.placement:
        # Claimed for an earlier admission (requeued and placed again since): what that launch
        # started belongs to the old attempt, which must be gone before a new one starts.
        _settle_interrupted_launch(workload, backend)
        runtime, previous = workload.runtime, None
    if previous:
        return _take_over_claim(workload, previous)
    if runtime.get("alive") and not _previous_replicas_gone(workload, backend):
        return None  # a requeued or re-placed workload: wait for its old replicas to exit first
    attempt = workload.attempt + 1
    # The attempt's run and its write-only token are committed with the claim, so the replicas
    # are never given a token that a rollback took away.
    claim = {"token": _claim_token(), "owner": _me(), "at": time.time(), "placement": workload.placement,
             "env": attempt_env(workload=workload, attempt=attempt)}
    workload_runtime_save(
        workload, {"backend": backend.name, "attempt": attempt, "replicas": [], "alive": True, "launching": claim},
        attempt=attempt, **_STOP_RESET,
    )
    return claim


def _take_over_claim(workload: Workload, previous: dict, **runtime_fields) -> dict | None:
    """Resume the claimed launch `previous` of a locked workload: a new claim of ours, or None
    while its claimer may still be launching it (a live process, claimed a moment ago)."""
    owner = previous.get("owner")
    age = time.time() - float(previous.get("at") or 0)
    if _is_me(owner):
        if previous.get("token") in _launching_here and age < LAUNCH_CLAIM_TIMEOUT:
            return None  # a thread of ours is launching it
    elif identity_alive(owner) and age < CLAIM_GRACE:
        return None
    claim = {**previous, "token": _claim_token(), "owner": _me(), "at": time.time(),
             "resumed": int(previous.get("resumed") or 0) + 1}
    workload_runtime_save(workload, {**(workload.runtime or {}), **runtime_fields, "launching": claim})
    if owner:  # released claims (a transient failure, retried) resume without a word
        workload_event_record(
            workload=workload, reason="LaunchResumed", type=EventType.WARNING,
            message=f"The launch of attempt {workload.attempt} by Cairn process {owner['pid']} did not finish; "
            "resuming it (replicas that already started are kept, not started again).",
        )
    return claim


def _launch_claimed(workload: Workload, claim: dict) -> Workload | None:
    """Launch the claimed attempt of a locked ADMITTED workload; returns it once it changed
    status, else None."""
    backend = backend_for(workload)
    attempt = workload.attempt
    try:
        if drift := dataset_versions_drift(workload=workload):  # never mount other data than its version
            raise LaunchError(drift)
        runtime = backend.launch(workload, attempt=attempt, run_env=claim.get("env") or {})
    except LaunchError as exc:
        return workload_transition(
            workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.FAILED, reason="LaunchFailed",
            message=f"Could not start the replicas: {exc}", event_type=EventType.WARNING, attempt=attempt,
            runtime={"backend": backend.name, "attempt": attempt, "replicas": [], "alive": False}, **_STOP_RESET,
        )
    runtime["owner"] = _me()
    done = workload_transition(
        workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.RUNNING, reason="Started",
        message=f"Started {workload.replicas} replica(s), attempt {attempt}.",
        attempt=attempt, runtime=runtime, started_at=timezone.now(), **_STOP_RESET,
    )
    if done is None:  # cannot happen while we hold the row lock, but never leave strays behind
        workload.runtime = runtime
        backend.signal(workload, force=True)
        return None
    if runtime.get("ignored_env"):
        workload_event_record(
            workload=done, reason="ReservedEnvIgnored", type=EventType.WARNING,
            message="These env keys are set by Cairn and were not taken from the spec: "
            + ", ".join(runtime["ignored_env"]),
        )
    return done


def _settle_interrupted_launch(workload: Workload, backend: Backend) -> bool:
    """A workload that left ADMITTED (stopped, requeued) while a launch of it was interrupted:
    record the replicas that launch started, so they are stopped like any others."""
    runtime = workload.runtime or {}
    if not runtime.get("launching"):
        return False
    started = backend.started(workload, attempt=workload.attempt)
    settled = {k: v for k, v in runtime.items() if k != "launching"}
    workload_runtime_save(workload, {**settled, "replicas": started, "alive": True})
    return True


def _previous_replicas_gone(workload: Workload, backend: Backend) -> bool:
    """True once no replica of the recorded (earlier) attempt is alive; signals them meanwhile."""
    if any(state.alive for state in backend.observe(workload)):
        stop_escalate(workload, backend)
        return False
    workload_runtime_save(workload, {**(workload.runtime or {}), "alive": False})
    return True


# -- stop ----------------------------------------------------------------------------------------

def workload_stop_signal(*, workload_id: int) -> int:
    """SIGTERM every live replica of a STOPPING workload (or of one no longer active that still
    has replicas, e.g. requeued), once: redeliveries do nothing. The reconciler escalates to
    SIGKILL after the grace period and records STOPPED. Returns how many replicas were signalled."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None:
            return 0
        runtime = workload.runtime or {}
        if workload.status != S.STOPPING and (workload.status in ACTIVE or not runtime.get("alive")):
            return 0
        try:
            backend = backend_for(workload)
        except BackendUnavailable:
            return 0
        if workload.term_sent_at is not None:
            return 0  # already asked (a redelivery): a second SIGTERM could cut a checkpoint short
        signalled = backend.signal(workload)
        workload_runtime_save(workload, runtime, term_sent_at=timezone.now())
    reconciler_wakeup.set()
    return signalled


# -- reconcile -----------------------------------------------------------------------------------

_cursors: dict[str, int] = {}  # per pass: rotates through workloads so a large backlog is covered over passes


# How long one reconciler pass may spend launching ADMITTED workloads (see reconcile_workloads).
DISPATCH_SECONDS_PER_PASS = 5.0


def reconcile_workloads(workloads: QuerySet[Workload], *, key: str,
                        reconcile: Callable[[Workload], bool] | None = None, limit: int = 200) -> int:
    """One level-triggered pass over `workloads` (a backend's own): the active ones (at most
    `limit`, rotating) through `reconcile` (default `workload_reconcile`), ADMITTED ones
    dispatched when their dispatch task was lost, inactive ones whose replicas still run
    stopped. Restarts claimed by a look are launched after its transaction commits. `key` names
    the pass (its rotation cursor). Returns how many workloads it acted on."""
    reconcile = reconcile or workload_reconcile
    cursor = _cursors.get(key, 0)
    active = workloads.filter(status__in=ACTIVE).order_by("pk").values_list("pk", flat=True)
    ids = list(active.filter(pk__gt=cursor)[:limit])
    if len(ids) < limit:
        ids += [pk for pk in active.filter(pk__lte=cursor)[: limit - len(ids)] if pk not in ids]
    _cursors[key] = ids[-1] if len(ids) >= limit else 0
    leftovers = list(
        workloads.filter(runtime__alive=True).exclude(status__in=ACTIVE).values_list("pk", flat=True)[:limit]
    )
    acted = 0
    admitted = set(workloads.filter(pk__in=ids, status=S.ADMITTED).values_list("pk", flat=True))
    # Every other workload is looked at first, then ADMITTED ones are launched for at most
    # DISPATCH_SECONDS_PER_PASS (at least one): a launch takes seconds on a loaded machine, and a
    # pass that launched hundreds in a row saw no replica finish for minutes (bench/chaos.py redis).
    dispatch_until = None
    for workload_id, step in itertools.chain(((pk, reconcile) for pk in ids if pk not in admitted),
                                             ((pk, _reconcile_leftover) for pk in leftovers),
                                             ((pk, reconcile) for pk in ids if pk in admitted)):
        if workload_id in admitted and step is reconcile:
            if dispatch_until is None:
                dispatch_until = time.monotonic() + DISPATCH_SECONDS_PER_PASS
            elif time.monotonic() >= dispatch_until:
                break  # the next pass goes on; the dispatch tasks launch them too
            # Normally the dispatch task launches it; if that message was lost (or the dispatcher
            # died mid-launch), we do, through the same claim.
            try:
                before = Workload.objects.filter(pk=workload_id).values_list("status", "runtime").first()
                after = workload_dispatch(workload_id=workload_id, skip_locked=True)
                if after is not None and before != (after.status, after.runtime):
                    acted += 1
            except Exception:
                logger.exception("reconciler: workload %s", workload_id)
            continue
        try:
            with transaction.atomic():
                workload = workload_locked(workload_id, skip_locked=True)
                if workload is not None and step(workload):
                    acted += 1
        except Exception:
            _forget_claimed_restarts()
            logger.exception("reconciler: workload %s", workload_id)
        _launch_claimed_restarts()
    return acted


def workload_reconcile(workload: Workload) -> bool:
    """One look at an active workload whose row the caller locked: a restart claimed and not
    launched is resumed; a launch interrupted before a stop is settled; then the stop is
    escalated, or the running attempt read (failure, success, limit, health)."""
    if workload.status not in ACTIVE or workload.status == S.ADMITTED:
        return False  # ADMITTED: reconcile_workloads dispatches it
    if workload.status == S.RUNNING and (workload.runtime or {}).get("launching"):
        return _resume_restart(workload)
    backend = backend_for(workload)
    settled = _settle_interrupted_launch(workload, backend)
    states = backend.observe(workload)
    if workload.status == S.STOPPING:
        return _reconcile_stopping(workload, backend, states) or settled
    return _reconcile_running(workload, backend, states) or settled



def _reconcile_stopping(workload: Workload, backend: Backend, states: list[ReplicaState]) -> bool:
    return workload_stop_step(workload, backend, alive=any(state.alive for state in states))


def _reconcile_running(workload: Workload, backend: Backend, states: list[ReplicaState]) -> bool:
    runtime = workload.runtime or {}
    failure = runtime.get("failure")
    acted = False
    if failure is None and _past_deadline(workload) and any(s.alive for s in states) and not any(
            s.failed for s in states):
        # Still running at its run-time limit: the same stop as a user's (SIGTERM now, SIGKILL
        # after the grace period), then FAILED. A replica that failed first is handled as a
        # failure below (with no restart, the limit having passed).
        if workload_stop_at_deadline(workload_id=workload.pk) is not None:
            workload.refresh_from_db(fields=["status", "runtime", "stop_requested_at", "stop_cause", "term_sent_at",
                                             "kill_sent_at"])
            stop_escalate(workload, backend)
            return True
    if failure is None and kind_spec(workload.kind).independent_replicas and isinstance(backend, ReplicaScaling):
        acted, states, settled = replicas_serve(workload, backend, states)
        runtime = workload.runtime or {}
        if settled:
            return acted
    if failure is None:
        if not states and workload.replicas == 0:
            return False  # nothing asked to run, nothing to watch
        if not states:
            failure = {"replica": None, "phase": LOST, "exit_code": None,
                       "message": "No replica of this attempt is known to the backend."}
        else:
            failed = [state for state in states if state.failed]
            if not failed:
                if all(not state.alive for state in states):
                    workload_observe(workload=workload, observation=AllSucceeded(replicas=len(states)))
                    return True
                # All alive: hung, straggling, or on a bad node? (self-healing, healing.py)
                failure = training_health_failure(workload, backend, states)
                if failure is None:
                    return False
                workload_runtime_save(workload, {**(workload.runtime or {}), "failure": failure})
                logger.warning("reconciler: workload %s: %s", workload.pk, failure["message"])
                stop_escalate(workload, backend)
                return True
            # The first to fail is the cause; replicas lost or killed by us afterwards are not.
            first = first_failure(failed)
            failure = {"replica": first.replica, "phase": first.phase, "exit_code": first.exit_code,
                       "message": first.describe(), "reason": first.reason}
        workload_runtime_save(workload, {**runtime, "failure": failure})
        acted = True
        logger.info("reconciler: workload %s: %s", workload.pk, failure["message"])
    if any(state.alive for state in states):
        stop_escalate(workload, backend)  # gang: the others cannot go on without it
        return True
    if _backing_off(workload, failure):
        return acted
    return _restart_or_finish(workload, backend, failure) or acted


def restart_backoff(attempt: int) -> float:
    """Seconds between the end of attempt n (every rank gone) and attempt n+1: doubling from
    CAIRN_RESTART_BACKOFF_SECONDS, at most CAIRN_RESTART_BACKOFF_MAX_SECONDS."""
    base = float(settings.CAIRN.get("RESTART_BACKOFF_SECONDS", 1.0))
    return min(base * 2 ** max(attempt - 1, 0), float(settings.CAIRN.get("RESTART_BACKOFF_MAX_SECONDS", 300.0)))


def _backing_off(workload: Workload, failure: dict) -> bool:
    """True while a restart waits out its backoff (counted from when the last rank was seen gone)."""
    if workload.attempt > workload.max_restarts:
        return False  # no restart coming: nothing to wait for
    now = time.time()
    gone_at = failure.get("gone_at")
    if gone_at is None:
        workload_runtime_save(workload, {**(workload.runtime or {}), "failure": {**failure, "gone_at": now}})
        gone_at = now
    return now - gone_at < restart_backoff(workload.attempt)


def _past_deadline(workload: Workload) -> bool:
    deadline = run_deadline(workload)
    return deadline is not None and deadline <= timezone.now()


# A restart is launched as a dispatch is: the decision commits a claim of attempt n+1 (its number,
# run and run token, who launches it) with the reconciler's pass over the workload, and the
# replicas start after that commit, under the row lock (`_launch_restart`). A reconciler killed
# in between leaves the claim: the next pass resumes the same attempt (`_resume_restart`), the
# backend adopting the replicas that already started. Launching inside the pass's transaction,
# as before, left no trace of a launch that a kill rolled back.
_claimed_restarts = threading.local()


def _restart_claim(workload: Workload, attempt: int) -> dict:
    """A claim of the launch of attempt `attempt` (registered as being launched by this process)."""
    return {"token": _claim_token(), "owner": _me(), "at": time.time(), "placement": workload.placement,
            "env": attempt_env(workload=workload, attempt=attempt)}


def _restart_or_finish(workload: Workload, backend: Backend, failure: dict) -> bool:
    def claim_restart(attempt: int) -> dict:
        claim = _restart_claim(workload, attempt)
        _restarts_claimed().append((workload.pk, claim["token"]))
        return {"backend": backend.name, "attempt": attempt, "replicas": [], "alive": True, "owner": _me(),
                "launching": claim}

    workload_observe(workload=workload, relaunch=claim_restart, observation=AttemptFailed(
        message=failure["message"], exit_code=failure.get("exit_code"), lost=failure["phase"] == LOST,
        reason=failure.get("reason", ""), restart_reason=failure.get("restart_reason", ""), move=bool(failure.get("move"))))
    return True


def _restarts_claimed() -> list[tuple[int, str]]:
    if not hasattr(_claimed_restarts, "pending"):
        _claimed_restarts.pending = []
    return _claimed_restarts.pending


def _launch_claimed_restarts() -> None:
    """Launch the restarts this thread claimed, now that their claims are committed."""
    pending = _restarts_claimed()
    while pending:
        workload_id, token = pending.pop(0)
        try:
            _launch_restart(workload_id, token)
        except Exception:
            logger.exception("reconciler: restarting workload %s", workload_id)
        finally:
            _launching_here.discard(token)


def _forget_claimed_restarts() -> None:
    """The pass that claimed them was rolled back: they were never claimed."""
    pending = _restarts_claimed()
    for _, token in pending:
        _launching_here.discard(token)
    pending.clear()


def _launch_restart(workload_id: int, token: str) -> None:
    claim = None
    try:
        with transaction.atomic():
            workload = workload_locked(workload_id)
            if workload is None or workload.status != S.RUNNING:
                return  # stopped meanwhile: what the claim started (nothing yet) is settled by the stop
            claim = (workload.runtime or {}).get("launching") or {}
            if claim.get("token") != token:
                return  # taken over by another reconciler
            _launch_restart_claimed(workload, claim)
    except Exception:
        if claim:
            _release_claim(workload_id, claim)  # the next pass resumes it at once
        raise


def workload_restart_launch(*, workload_id: int) -> bool:
    """Launch the restart a RUNNING workload's runtime is waiting for, for a backend that decides
    a restart first and starts it later (Kubernetes: once the failed attempt's pods are gone and
    the backoff has passed). The same claim as a dispatch's: the claim of the attempt (its run
    and run token, who launches it) commits first, then the replicas start under the row lock;
    a claim left by a reconciler that died in between is resumed by the next call (event
    LaunchResumed), the backend adopting what already started. True when it acted."""
    with transaction.atomic():
        workload = workload_locked(workload_id, skip_locked=True)
        if workload is None or workload.status != S.RUNNING:
            return False
        runtime = workload.runtime or {}
        if runtime.get("launching"):
            return _resume_restart(workload)
        claim = _restart_claim(workload, workload.attempt)
        workload_runtime_save(workload, {**runtime, "owner": _me(), "launching": claim})
    try:
        _launch_restart(workload_id, claim["token"])
    finally:
        _launching_here.discard(claim["token"])
    return True


def _resume_restart(workload: Workload) -> bool:
    """A RUNNING workload whose restart was claimed and not launched (its claimer died, or lost
    the database): launch the same attempt, adopting what already started."""
    claim = _take_over_claim(workload, workload.runtime["launching"], owner=_me())
    if claim is None:
        return False  # its claimer is about to launch it
    try:
        _launch_restart_claimed(workload, claim)
    finally:
        _launching_here.discard(claim["token"])
    return True


def _launch_restart_claimed(workload: Workload, claim: dict) -> None:
    backend = backend_for(workload)
    attempt = workload.attempt
    try:
        if drift := dataset_versions_drift(workload=workload):
            raise LaunchError(drift)
        runtime = backend.launch(workload, attempt=attempt, run_env=claim.get("env") or {})
    except LaunchError as exc:
        workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.FAILED, reason="LaunchFailed",
            message=f"Could not start attempt {attempt} of the restart: {exc}", event_type=EventType.WARNING,
            runtime={**{k: v for k, v in (workload.runtime or {}).items() if k != "launching"},
                     "backend": backend.name, "attempt": attempt, "replicas": [], "alive": False},
        )
        return
    workload_runtime_save(workload, {**runtime, "owner": _me()})


def _reconcile_leftover(workload: Workload) -> bool:
    """A workload no longer active (requeued, finished elsewhere) whose replicas still run."""
    if workload.status in ACTIVE or not (workload.runtime or {}).get("alive"):
        return False
    backend = backend_for(workload)
    _settle_interrupted_launch(workload, backend)
    workload_stop_step(workload, backend, alive=any(state.alive for state in backend.observe(workload)))
    return True
