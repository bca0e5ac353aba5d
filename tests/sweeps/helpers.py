"""Helpers of the sweep tests: a sweep on the local pool, and a trial's workload moved through
its life by hand (the in-process driver tests; the end-to-end ones run real processes)."""
import time

from django.utils import timezone

from apps.sweeps.services import sweep_create
from apps.tracking.services import run_for_attempt, run_ingest
from apps.tracking.validation import Batch
from apps.workloads.choices import WorkloadStatus
from apps.workloads.services import workload_transition

S = WorkloadStatus


def make_sweep(project, user, **overrides):
    fields = dict(
        project=project, created_by=user, name="sw", template={"command": "python train.py",
                                                               "resources": {"cpu": 0.5, "memory": "256Mi"}},
        space={"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
               "solver": {"type": "categorical", "choices": ["adam", "sgd"]},
               "momentum": {"type": "float", "low": 0.5, "high": 0.99, "when": {"solver": "sgd"}}},
        objective_key="val_acc", direction="maximize", algorithm="random", max_trials=4, max_gpu_hours=None,
        max_concurrent=2, priority=4, seed=7,
    )
    fields.update(overrides)
    return sweep_create(**fields)


def start(workload):
    """QUEUED -> ADMITTED -> RUNNING, as the scheduler and a backend would; returns its run."""
    workload_transition(workload_id=workload.pk, from_statuses={S.QUEUED}, to_status=S.ADMITTED, reason="Admitted",
                        admitted_at=timezone.now())
    workload_transition(workload_id=workload.pk, from_statuses={S.ADMITTED}, to_status=S.RUNNING, reason="Started",
                        started_at=timezone.now(), attempt=1)
    return run_for_attempt(workload=workload, attempt=1)


def log(run, key, values: dict[int, float]):
    now = time.time()
    run_ingest(run=run, batch=Batch(batch_id=None, points=[(key, step, value, now) for step, value in values.items()]))


def finish(workload, status=S.SUCCEEDED):
    workload_transition(workload_id=workload.pk, from_statuses={S.RUNNING, S.STOPPING}, to_status=status,
                        reason="Done")
