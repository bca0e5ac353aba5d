"""The sweep driver: asks Optuna for trials, runs each as a training workload, reports the
objective the trial logs as intermediate values, prunes, and tells Optuna how each trial ended.

One pass (`sweeps_drive`) looks at every running or stopping sweep; the loop that repeats it is
`manage.py run_sweeps` in server mode and a thread of `run_embedded`. All state is in the
database (the Trial rows and Optuna's own tables), and every step can be repeated, so a driver
killed at any point and started again continues the sweep without losing or repeating a trial:

- a trial Optuna handed out but that has no Trial row yet (killed between the two) is adopted;
- a Trial row and its workload are written in one transaction (the link is a unique key);
- a workload that has ended is told to Optuna with skip_if_finished, and `told` marks it done.

One driver works on a sweep at a time: it holds the sweep's lease (a compare-and-set on
lease_owner / lease_until, renewed while it works), on PostgreSQL and SQLite alike. No database
transaction is held across Optuna calls (SQLite would lock Optuna's connection out).
"""
from __future__ import annotations

import logging
import math
import os
import socket
import uuid
import warnings
from datetime import timedelta

import optuna
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from optuna.trial import TrialState

from apps.core.errors import ConflictError, ServiceError
from apps.tracking.choices import MAX_STEP, RunStatus
from apps.tracking.models import MetricSummary, Run
from apps.tracking.selectors import raw_points
from apps.tracking.services import run_count_as_finished
from apps.training.api.serializers import TrainingJobCreateSerializer
from apps.workloads.choices import TERMINAL, EventType, WorkloadStatus
from apps.workloads.lifecycle import SERVER_SHUTDOWN
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record, workload_stop, workload_submit

from . import study as study_
from .choices import PRUNED_REASON, SWEEP_ACTIVE, TRIAL_ACTIVE, Algorithm, SweepStatus, TrialStatus
from .events import trial_changed
from .models import Sweep, Trial
from .selectors import gpu_hours_used
from .services import sweep_status_set
from .space import env_name, env_value, suggest

logger = logging.getLogger(__name__)
W = WorkloadStatus

OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _lease_seconds() -> float:
    return float(settings.CAIRN.get("SWEEP_LEASE_SECONDS", 30))


def sweep_lease(*, sweep_id: int, owner: str = OWNER) -> bool:
    """Take or renew the sweep's lease; False when another live driver holds it."""
    now = timezone.now()
    return bool(Sweep.objects.filter(pk=sweep_id).filter(
        Q(lease_owner=owner) | Q(lease_owner="") | Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    ).update(lease_owner=owner, lease_until=now + timedelta(seconds=_lease_seconds())))


def sweeps_drive(*, owner: str = OWNER) -> int:
    """One pass over every running or stopping sweep. Returns how many it worked on."""
    done = 0
    for sweep_id in Sweep.objects.filter(status__in=SWEEP_ACTIVE).values_list("pk", flat=True):
        try:
            if sweep_drive(sweep_id=sweep_id, owner=owner):
                done += 1
        except Exception:  # one broken sweep must not stop the others
            logger.exception("sweep %s: the driver's pass failed", sweep_id)
    return done


def sweep_drive(*, sweep_id: int, owner: str = OWNER) -> bool:
    if not sweep_lease(sweep_id=sweep_id, owner=owner):
        return False
    sweep = Sweep.objects.select_related("project", "pool", "created_by").get(pk=sweep_id)
    if sweep.status not in SWEEP_ACTIVE:
        return False
    study = study_.study(sweep, asked=Trial.objects.filter(sweep=sweep).count())
    _adopt_orphans(sweep, study)
    for trial in Trial.objects.filter(sweep=sweep).filter(Q(told=False) | Q(status__in=TRIAL_ACTIVE)).select_related(
            "workload").order_by("number"):
        _follow(sweep, study, trial, owner=owner)
    sweep.refresh_from_db(fields=["status"])
    if sweep.status == SweepStatus.STOPPING:
        _finish_stopping(sweep, study)
        return True
    _fill(sweep, study, owner=owner)
    _maybe_complete(sweep)
    return True


# -- trials ------------------------------------------------------------------------------------------


def _adopt_orphans(sweep: Sweep, study: optuna.Study) -> None:
    """Trials Optuna handed out whose Trial row was never written (a driver killed in between).

    The driver may have died before it had suggested every parameter (ask() and each suggest_*
    write to Optuna's storage one at a time): the space is suggested again on the same trial,
    which keeps the values already drawn and draws the missing ones. Adopting the partial params
    as they stood ran a trial without some of its PARAM_* variables."""
    known = set(Trial.objects.filter(sweep=sweep).values_list("number", flat=True))
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if frozen.number in known:
            continue
        logger.info("sweep %s: adopting trial %s (asked before a restart)", sweep.pk, frozen.number)
        params = suggest(optuna.trial.Trial(study, frozen._trial_id), sweep.space,
                         grid=sweep.algorithm == Algorithm.GRID)
        trial = Trial.objects.create(sweep=sweep, number=frozen.number, optuna_trial_id=frozen._trial_id,
                                     params=params)
        if sweep.status == SweepStatus.RUNNING:
            _submit(sweep, study, trial)
        else:
            _end(sweep, study, trial, status=TrialStatus.STOPPED, message="The sweep was stopped before it started.")


def trial_workload_name(sweep: Sweep, trial: Trial) -> str:
    return f"{sweep.name}-{trial.number}" + (f"-r{trial.resubmits}" if trial.resubmits else "")


def _submission(sweep: Sweep, trial: Trial) -> dict:
    template = dict(sweep.template)
    env = dict(template.get("env") or {})
    env.update({env_name(name): env_value(value) for name, value in trial.params.items()})
    data = {**template, "env": env, "name": trial_workload_name(sweep, trial), "priority": sweep.priority,
            "pool": sweep.pool.name}
    serializer = TrainingJobCreateSerializer(data=data)
    if not serializer.is_valid():
        raise ServiceError(f"The sweep's template is no longer valid: {serializer.errors}")
    serializer.validate_for_pool(sweep.pool)
    return serializer.to_submission()


def _submit(sweep: Sweep, study: optuna.Study, trial: Trial) -> None:
    """Submit the trial's workload and link it, in one transaction. A submission refused (the
    pool or quota is gone, the name taken) fails the trial, and the sweep, with the reason."""
    try:
        with transaction.atomic():
            workload = workload_submit(project=sweep.project, pool=sweep.pool, created_by=sweep.created_by,
                                       **_submission(sweep, trial))
            won = Trial.objects.filter(pk=trial.pk, workload__isnull=True).update(workload=workload)
            if not won:
                raise ConflictError("the trial already has a workload")
            workload_event_record(workload=workload, reason="SweepTrial",
                                  message=f"Trial {trial.number} of sweep '{sweep.name}': {trial.params}")
            _changed(sweep, trial)
        trial.workload = workload
    except ServiceError as exc:
        trial.refresh_from_db()
        if trial.workload_id is not None:  # linked by an earlier pass after all
            return
        message = f"Could not submit trial {trial.number}: {exc.detail}"
        _end(sweep, study, trial, status=TrialStatus.FAILED, message=message)
        sweep_status_set(sweep=sweep, status=SweepStatus.FAILED, message=message, from_statuses=SWEEP_ACTIVE)


def _resubmit(sweep: Sweep, study: optuna.Study, trial: Trial, workload: Workload) -> None:
    """A trial whose job Cairn itself stopped (the embedded server shut down) runs again under the
    same trial, as a new job (<sweep>-<number>-r<k>): the trial is not lost, and not repeated."""
    with transaction.atomic():
        won = Trial.objects.filter(pk=trial.pk, workload=workload).update(
            resubmits=trial.resubmits + 1, workload=None, last_step=None, last_value=None, status=TrialStatus.PENDING)
        if not won:
            return
        trial.resubmits, trial.workload, trial.workload_id = trial.resubmits + 1, None, None
        trial.last_step = trial.last_value = None
        _submit(sweep, study, trial)


def _changed(sweep: Sweep, trial: Trial, status: str | None = None) -> None:
    """Tell the sweep's live topics (after commit) that this trial changed."""
    trial_changed(project_id=sweep.project_id, sweep_id=sweep.pk, number=trial.number, status=status or trial.status)


def _latest_run(workload: Workload) -> Run | None:
    return Run.objects.filter(workload=workload).order_by("-attempt", "-id").first()


def _follow(sweep: Sweep, study: optuna.Study, trial: Trial, *, owner: str) -> None:
    if trial.status in TRIAL_ACTIVE and trial.workload_id is None:
        if sweep.status == SweepStatus.RUNNING:
            _submit(sweep, study, trial)
        else:
            _end(sweep, study, trial, status=TrialStatus.STOPPED, message="The sweep was stopped before it started.")
        return
    if trial.status == TrialStatus.PRUNED and not trial.told:
        _settle_pruned(sweep, study, trial)
        return
    if trial.status not in TRIAL_ACTIVE:  # ended, not yet told (a restart in between)
        _tell(study, trial)
        return
    workload = Workload.objects.get(pk=trial.workload_id)
    run = _latest_run(workload)
    if run is not None and _report(sweep, study, trial, workload, run, owner=owner):
        return  # pruned
    if workload.status == W.RUNNING and trial.status == TrialStatus.PENDING:
        Trial.objects.filter(pk=trial.pk, status=TrialStatus.PENDING).update(status=TrialStatus.RUNNING)
        trial.status = TrialStatus.RUNNING
        _changed(sweep, trial)
    if workload.status not in TERMINAL:
        return
    if workload.status == W.SUCCEEDED:
        summary = MetricSummary.objects.filter(run=run, key=sweep.objective_key).first() if run else None
        if summary is None or not math.isfinite(summary.last_value):
            _end(sweep, study, trial, status=TrialStatus.FAILED, message=(
                f"The objective '{sweep.objective_key}' was never logged: workload {workload.name} succeeded "
                f"without logging it (log it with cairn.log({{'{sweep.objective_key}': value}}, step=epoch))."))
            return
        _end(sweep, study, trial, status=TrialStatus.SUCCEEDED, objective=summary.last_value,
             message=f"{sweep.objective_key} = {summary.last_value:g} at step {summary.last_step}.")
    elif workload.status == W.STOPPED and workload.status_reason == SERVER_SHUTDOWN and sweep.status == SweepStatus.RUNNING:
        _resubmit(sweep, study, trial, workload)
    elif workload.status == W.STOPPED:
        _end(sweep, study, trial, status=TrialStatus.STOPPED, message=workload.status_message or "Stopped.")
    else:  # FAILED, LOST: recorded, never resubmitted
        _end(sweep, study, trial, status=TrialStatus.FAILED,
             message=f"Workload {workload.name} {workload.status} ({workload.status_reason}): "
                     f"{workload.status_message}".strip())


def _report(sweep: Sweep, study: optuna.Study, trial: Trial, workload: Workload, run: Run, *, owner: str) -> bool:
    """Report the objective's new points to Optuna, one step at a time, asking the pruner after
    each while the workload is still active. Returns True when it pruned the trial."""
    lo = -MAX_STEP if trial.last_step is None else trial.last_step + 1
    points = raw_points(run=run, key=sweep.objective_key, lo=lo, hi=MAX_STEP)
    by_step: dict[int, float] = {}
    for step, value in points.pairs():
        by_step[int(step)] = float(value)  # a step logged twice: its last value
    if not by_step:
        return False
    optuna_trial = optuna.trial.Trial(study, trial.optuna_trial_id)
    asha = sweep.algorithm == Algorithm.ASHA
    last = None
    for step in sorted(by_step):
        value = by_step[step]
        if not math.isfinite(value):
            continue
        with warnings.catch_warnings():  # a trial run again after a shutdown reports its steps again
            warnings.filterwarnings("ignore", message="The reported value is ignored", category=UserWarning)
            optuna_trial.report(value, step)
        last = (step, value)
        # Asked at every step even once the workload has ended: successive halving records the
        # trial's value at each rung it reaches then, and later trials compete with it.
        # A run its script already finished is not pruned: its work is done (its last steps may
        # simply not have been read yet), and stopping it now would throw the result away.
        if (asha and optuna_trial.should_prune() and workload.status not in TERMINAL
                and run.status != RunStatus.FINISHED):
            Trial.objects.filter(pk=trial.pk).update(last_step=step, last_value=value)
            return _prune(sweep, study, trial, workload, step=step, value=value)
    if last is not None:
        Trial.objects.filter(pk=trial.pk).update(last_step=last[0], last_value=last[1])
        trial.last_step, trial.last_value = last
        _changed(sweep, trial)
    return False


def _rung(study: optuna.Study, trial: Trial) -> tuple[int | None, float | None]:
    """The rung at which successive halving judged the trial, and the value it judged."""
    attrs = study._storage.get_trial(trial.optuna_trial_id).system_attrs
    rungs = sorted(int(key.rsplit("_", 1)[1]) for key in attrs if key.startswith("completed_rung_"))
    if not rungs:
        return None, None
    return rungs[-1], attrs[f"completed_rung_{rungs[-1]}"]


def _prune(sweep: Sweep, study: optuna.Study, trial: Trial, workload: Workload, *, step: int, value: float) -> bool:
    rung, rung_value = _rung(study, trial)
    rung_text = f"rung {rung} (step {step})" if rung is not None else f"step {step}"
    message = (f"Pruned at {rung_text}: {sweep.objective_key} = {value:g} is not among the best "
               f"1/{sweep.reduction_factor} of the trials that reached this rung.")
    with transaction.atomic():
        try:
            workload_stop(workload=workload, reason=PRUNED_REASON)
        except ConflictError:  # it finished on its own first: let it count as finished
            return False
        workload_event_record(workload=workload, reason=PRUNED_REASON, message=message, type=EventType.NORMAL)
        Trial.objects.filter(pk=trial.pk).update(status=TrialStatus.PRUNED, message=message, pruned_step=step,
                                                 pruned_rung=rung, finished_at=timezone.now(), last_step=step,
                                                 last_value=value)
        _changed(sweep, trial, TrialStatus.PRUNED)
    # Optuna is told once its workload has ended (_settle_pruned): the stop may have come after
    # the script had done all its work, and then the trial completed.
    trial.refresh_from_db()
    logger.info("sweep %s: trial %s pruned at %s (%s)", sweep.pk, trial.number, rung_text, rung_value)
    return True


def _settle_pruned(sweep: Sweep, study: optuna.Study, trial: Trial) -> None:
    """A pruned trial whose workload has ended: pruned, or completed when its script had done all
    its work before the prune's SIGTERM reached it. Then it reports its final value, the run says
    finished (the sweep page and the runs comparison agree), and best and importance count it."""
    workload = Workload.objects.filter(pk=trial.workload_id).first()
    if workload is not None and workload.status not in TERMINAL:
        return  # still stopping
    run = _latest_run(workload) if workload is not None else None
    summary = MetricSummary.objects.filter(run=run, key=sweep.objective_key).first() if run else None
    how = _ran_to_the_end(sweep, trial, workload, run, summary)
    if how:
        message = (f"{sweep.objective_key} = {summary.last_value:g} at step {summary.last_step}: it {how} "
                   f"before the prune at step {trial.pruned_step} took effect, so it counts as completed.")
        Trial.objects.filter(pk=trial.pk).update(pruned_step=None, pruned_rung=None, last_step=summary.last_step,
                                                 last_value=summary.last_value)
        trial.pruned_step = trial.pruned_rung = None
        trial.last_step, trial.last_value = summary.last_step, summary.last_value
        run_count_as_finished(run=run)
        workload_event_record(workload=workload, reason="TrialCompleted", message=message)
        _end(sweep, study, trial, status=TrialStatus.SUCCEEDED, objective=summary.last_value, message=message)
        return
    _tell(study, trial)


def _ran_to_the_end(sweep: Sweep, trial: Trial, workload: Workload | None, run: Run | None,
                    summary: MetricSummary | None) -> str:
    """How a pruned trial's script had finished its work before the prune's SIGTERM was sent
    (the stop is asked for first, the signal follows; a process already gone gets none), or "":

    - "ran to the end": its run was marked finished (the SDK does it as the script exits; a
      script killed by the signal never does);
    - "reported its final value": it had logged the objective at the last step the trials that
      completed reached (the same template runs the same number of steps), and was killed while
      it wrapped up.
    """
    if workload is None or run is None or summary is None or not math.isfinite(summary.last_value):
        return ""
    cutoff = workload.term_sent_at or workload.finished_at or timezone.now()
    if run.status == RunStatus.FINISHED and run.finished_at is not None and run.finished_at <= cutoff:
        return "ran to the end"
    final = (Trial.objects.filter(sweep=sweep, status=TrialStatus.SUCCEEDED).exclude(pk=trial.pk)
             .aggregate(step=Max("last_step"))["step"])
    if final is not None and summary.last_step >= final and summary.last_time <= cutoff:
        return "reported its final value"
    return ""


def _end(sweep: Sweep, study: optuna.Study, trial: Trial, *, status: str, message: str,
         objective: float | None = None) -> None:
    Trial.objects.filter(pk=trial.pk).update(status=status, message=message[:5000], objective=objective,
                                             finished_at=timezone.now())
    trial.status, trial.message, trial.objective = status, message, objective
    _changed(sweep, trial)
    _tell(study, trial)


def _tell(study: optuna.Study, trial: Trial) -> None:
    """Tell Optuna how the trial ended (idempotent: skip_if_finished), then mark it told."""
    if trial.status == TrialStatus.SUCCEEDED:
        study.tell(trial.number, trial.objective, skip_if_finished=True)
    elif trial.status == TrialStatus.PRUNED:
        study.tell(trial.number, state=TrialState.PRUNED, skip_if_finished=True)
    else:  # failed or stopped: the samplers leave it out
        study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
    Trial.objects.filter(pk=trial.pk).update(told=True)
    trial.told = True


# -- the sweep ---------------------------------------------------------------------------------------


def _holding(sweep: Sweep) -> int:
    """Trials that count against max_concurrent: not ended, or whose workload still holds resources
    (a pruned trial's workload is stopping)."""
    return Trial.objects.filter(sweep=sweep).filter(
        Q(status__in=TRIAL_ACTIVE) | (Q(workload__isnull=False) & ~Q(workload__status__in=TERMINAL))).count()


def budget_left(sweep: Sweep) -> str:
    """Why no further trial may start ("" while the budget allows one)."""
    if sweep.max_trials is not None and Trial.objects.filter(sweep=sweep).count() >= sweep.max_trials:
        return f"All {sweep.max_trials} trials have been started."
    if sweep.max_gpu_hours is not None and gpu_hours_used(sweep) >= sweep.max_gpu_hours:
        return f"The budget of {sweep.max_gpu_hours:g} GPU-hours is used up."
    return ""


FAILURE_LIMIT = 3


def _fill(sweep: Sweep, study: optuna.Study, *, owner: str) -> None:
    """Ask Optuna for new trials while the budget and max_concurrent allow."""
    while sweep.status == SweepStatus.RUNNING:
        if budget_left(sweep) or _holding(sweep) >= sweep.max_concurrent:
            return
        ended = Trial.objects.filter(sweep=sweep).exclude(status__in=TRIAL_ACTIVE)
        if (ended.count() >= FAILURE_LIMIT and not ended.exclude(status=TrialStatus.FAILED).exists()):
            sweep_status_set(sweep=sweep, status=SweepStatus.FAILED, from_statuses=SWEEP_ACTIVE, message=(
                f"The first {ended.count()} trials all failed; the sweep stopped asking for more. "
                f"The last one: {ended.order_by('-number').first().message}"))
            return
        if not sweep_lease(sweep_id=sweep.pk, owner=owner):
            return
        optuna_trial = study.ask()
        params = suggest(optuna_trial, sweep.space, grid=sweep.algorithm == Algorithm.GRID)
        trial = Trial.objects.create(sweep=sweep, number=optuna_trial.number, optuna_trial_id=optuna_trial._trial_id,
                                     params=params)
        _submit(sweep, study, trial)
        sweep.refresh_from_db(fields=["status"])


def _maybe_complete(sweep: Sweep) -> None:
    sweep.refresh_from_db(fields=["status"])
    if sweep.status != SweepStatus.RUNNING:
        return
    reason = budget_left(sweep)
    if not reason or _holding(sweep) or Trial.objects.filter(sweep=sweep, told=False).exists():
        return
    sweep_status_set(sweep=sweep, status=SweepStatus.COMPLETED, message=reason, from_statuses={SweepStatus.RUNNING})


def _finish_stopping(sweep: Sweep, study: optuna.Study) -> None:
    """A stopping sweep ends STOPPED once none of its trials' workloads holds resources."""
    for workload in Workload.objects.filter(sweep_trial__sweep=sweep).exclude(status__in=TERMINAL).exclude(
            status=W.STOPPING):
        try:
            workload_stop(workload=workload, reason="SweepStopped")
        except ConflictError:
            continue
    if _holding(sweep) or Trial.objects.filter(sweep=sweep, told=False).exists():
        return
    sweep_status_set(sweep=sweep, status=SweepStatus.STOPPED, message=sweep.status_message or "Stopped.",
                     from_statuses={SweepStatus.STOPPING})
