"""Writes to sweeps: create, stop, and what each trial's attempt is given at launch.

The driver (driver.py) asks Optuna for trials and follows them; everything here is what the API
and the backends call."""
from __future__ import annotations

import json
import logging
import uuid

from django.db import transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.core.errors import ConflictError, ServiceError
from apps.projects.models import Project
from apps.tracking.services import run_for_attempt, run_params_set
from apps.training.api.serializers import TrainingJobCreateSerializer
from apps.workloads.choices import TERMINAL
from apps.workloads.models import Workload
from apps.workloads.services import workload_stop, workload_validate_pool

from . import study as study_
from .choices import SWEEP_ACTIVE, Algorithm, SweepStatus
from .events import sweep_changed, sweep_deleted
from .models import Sweep, Trial
from .space import check_grid, env_name, parse_space

logger = logging.getLogger(__name__)

# What a sweep's template may not set: each trial gets its own name, the sweep's priority.
TEMPLATE_OWNED = ("name", "priority")


def template_check(*, project: Project, template) -> tuple[object, TrainingJobCreateSerializer]:
    """Validate a training-job template as POST /training-jobs/ would; returns (pool, serializer).
    Invalid: ServiceError (400) naming the field."""
    if not isinstance(template, dict):
        raise ServiceError("template: give the training job as a mapping (command, resources, env, ...).")
    owned = [key for key in TEMPLATE_OWNED if key in template]
    if owned:
        raise ServiceError(f"template.{owned[0]}: set by the sweep (trials are named <sweep>-<number> and run at "
                           "the sweep's priority); remove it from the template.")
    serializer = TrainingJobCreateSerializer(data={**template, "name": "sweep-template-check"})
    if not serializer.is_valid():
        field, problems = next(iter(serializer.errors.items()))
        problem = problems[0] if isinstance(problems, list) else problems
        raise ServiceError(f"template.{field}: {problem}")
    pool = workload_validate_pool(project=project, pool_name=serializer.validated_data.get("pool"))
    serializer.validate_for_pool(pool)
    return pool, serializer


def sweep_create(
    *, project: Project, created_by: User | None, name: str, template: dict, space, objective_key: str,
    direction: str, algorithm: str, max_trials: int | None, max_gpu_hours: float | None, max_concurrent: int,
    priority: int, seed: int | None = None, min_resource: int = 1, reduction_factor: int = 3,
) -> Sweep:
    """Check everything a sweep needs and store it RUNNING; the driver starts its trials."""
    parsed = parse_space(space)
    pool, serializer = template_check(project=project, template=template)
    env = serializer.validated_data.get("env") or {}
    for param in parsed:
        if env_name(param["name"]) in env:
            raise ServiceError(f"template.env: {env_name(param['name'])} is set by the sweep (parameter "
                               f"'{param['name']}'); remove it from the template.")
    if max_trials is not None and max_trials < 1:
        raise ServiceError("max_trials must be at least 1.")
    if max_gpu_hours is not None and not max_gpu_hours > 0:
        raise ServiceError("max_gpu_hours must be above 0.")
    if algorithm == Algorithm.GRID:
        size = check_grid(parsed)
        max_trials = min(max_trials or size, size)
    if max_trials is None and max_gpu_hours is None:
        raise ServiceError("Give a budget: max_trials, max_gpu_hours or both.")
    if max_gpu_hours is not None and max_trials is None and not serializer.to_submission()["gpu_milli"]:
        raise ServiceError("The trials ask for no GPU, so a GPU-hour budget would never end the sweep; "
                           "give max_trials.")
    if Sweep.objects.filter(project=project, name=name).exists():
        raise ConflictError(f"A sweep named '{name}' already exists in project '{project.slug}'.")
    sweep = Sweep.objects.create(
        project=project, name=name, created_by=created_by, pool=pool, template=template, space=parsed,
        objective_key=objective_key, direction=direction, algorithm=algorithm, max_trials=max_trials,
        max_gpu_hours=max_gpu_hours, max_concurrent=max_concurrent, priority=priority, seed=seed,
        min_resource=min_resource, reduction_factor=reduction_factor,
        study_name=f"cairn-sweep-{uuid.uuid4().hex}",
    )
    sweep_changed(project_id=project.pk, sweep_id=sweep.pk, status=sweep.status)
    return sweep


def sweep_stop(*, sweep: Sweep, user: User | None = None) -> Sweep:
    """Stop a sweep: no more trials, and its running trials' workloads are stopped now. It ends
    STOPPED once they have all ended (the driver sees to it)."""
    updated = Sweep.objects.filter(pk=sweep.pk, status=SweepStatus.RUNNING).update(
        status=SweepStatus.STOPPING, status_message=f"Stop requested{' by ' + user.username if user else ''}.",
        updated_at=timezone.now())
    sweep.refresh_from_db()
    if not updated and sweep.status != SweepStatus.STOPPING:
        raise ConflictError(f"Sweep '{sweep.name}' has already ended ({sweep.status}).")
    if updated:
        sweep_changed(project_id=sweep.project_id, sweep_id=sweep.pk, status=sweep.status)
    for workload in Workload.objects.filter(sweep_trial__sweep=sweep).exclude(status__in=TERMINAL):
        try:
            workload_stop(workload=workload, user=user, reason="SweepStopped")
        except ConflictError:  # it finished meanwhile
            continue
    return sweep


def sweep_status_set(*, sweep: Sweep, status: str, message: str = "", from_statuses=None) -> bool:
    """Compare-and-set of the sweep's status (and finished_at when it ends)."""
    queryset = Sweep.objects.filter(pk=sweep.pk)
    if from_statuses is not None:
        queryset = queryset.filter(status__in=from_statuses)
    fields = {"status": status, "status_message": message, "updated_at": timezone.now()}
    if status in (SweepStatus.COMPLETED, SweepStatus.STOPPED, SweepStatus.FAILED):
        fields["finished_at"] = timezone.now()
    won = bool(queryset.update(**fields))
    if won:
        for key, value in fields.items():
            setattr(sweep, key, value)
        sweep_changed(project_id=sweep.project_id, sweep_id=sweep.pk, status=status)
    return won


def sweep_delete(*, sweep: Sweep) -> None:
    """Delete an ended sweep: its row, its Trial rows and Optuna's study (its trials, params and
    intermediate values in Cairn's database). The trials' workloads and their runs stay: they are
    ordinary training jobs (deleted like any other, from the workloads list), and the metrics
    they logged remain in the runs and the comparison view. A running or stopping sweep is a
    409: stop it first (its driver would otherwise go on asking Optuna for trials)."""
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().filter(pk=sweep.pk).first()
        if locked is None:
            return  # deleted meanwhile: the end the caller wanted
        if locked.status in SWEEP_ACTIVE:
            raise ConflictError(f"Sweep '{locked.name}' is {locked.status}; stop it (cairn sweep stop) and wait "
                                "until it has stopped before deleting it.")
        project_id = locked.project_id
        locked.delete()  # Trial rows cascade, the workloads they point at are not touched; the study: below
        sweep_deleted(project_id=project_id, sweep_id=sweep.pk)


def sweep_study_forget(*, study_name: str) -> None:
    """Connected to Sweep's post_delete (apps.py): however a sweep row goes (sweep_delete, or its
    project's deletion cascading), Optuna's study goes too, once that commits, on Optuna's own
    connection (SQLite would lock it out of an open write)."""

    def forget() -> None:
        try:
            study_.study_delete(study_name)
        except Exception:  # the sweep is gone either way; leftover rows only take space
            logger.exception("sweeps: could not delete Optuna's study %s", study_name)

    transaction.on_commit(forget)


def trial_env_for_attempt(*, workload: Workload, attempt: int) -> dict[str, str]:
    """Registered with the backends' launch env: a trial's replicas get CAIRN_SWEEP,
    CAIRN_TRIAL and CAIRN_SWEEP_PARAMS (JSON, typed), and its run holds the params from the start."""
    trial = Trial.objects.filter(workload=workload).select_related("sweep").first()
    if trial is None:
        return {}
    with transaction.atomic():
        run = run_for_attempt(workload=workload, attempt=attempt)
        run_params_set(run=run, params=trial.params)
    return {"CAIRN_SWEEP": trial.sweep.name, "CAIRN_TRIAL": str(trial.number),
            "CAIRN_SWEEP_PARAMS": json.dumps(trial.params)}


def project_has_no_running_sweeps(project: Project) -> None:
    """Registered with projects' delete checks: a project whose sweeps still run stays (the driver
    would submit its next trials)."""
    running = Sweep.objects.filter(project=project, status__in=SWEEP_ACTIVE).values_list("name", flat=True)[:3]
    if running:
        raise ConflictError(f"Sweep(s) {', '.join(running)} of this project are still running; stop them first.")
