"""Reads of sweeps: GPU-hours used, the best trial, counts, the runs of the trials."""
from __future__ import annotations

from django.db.models import Count
from django.utils import timezone

from apps.tracking.models import Run

from .choices import Direction, TrialStatus
from .models import Sweep, Trial


def gpu_hours_used(sweep: Sweep) -> float:
    """GPU-hours the sweep's trials have held: GPUs x replicas x time since each started."""
    now = timezone.now()
    total = 0.0
    for started, finished, gpu_milli, replicas in Trial.objects.filter(
            sweep=sweep, workload__started_at__isnull=False, workload__gpu_milli__gt=0).values_list(
            "workload__started_at", "workload__finished_at", "workload__gpu_milli", "workload__replicas"):
        seconds = ((finished or now) - started).total_seconds()
        total += gpu_milli / 1000 * replicas * max(seconds, 0) / 3600
    return total


def best_trial(sweep: Sweep) -> Trial | None:
    order = "-objective" if sweep.direction == Direction.MAXIMIZE else "objective"
    return (Trial.objects.filter(sweep=sweep, status=TrialStatus.SUCCEEDED, objective__isnull=False)
            .order_by(order, "number").first())


def trial_counts(sweeps: list[Sweep]) -> dict[int, dict[str, int]]:
    """sweep id -> status -> trials, in one query."""
    out: dict[int, dict[str, int]] = {s.pk: {} for s in sweeps}
    for row in Trial.objects.filter(sweep__in=sweeps).values("sweep_id", "status").annotate(n=Count("id")):
        out[row["sweep_id"]][row["status"]] = row["n"]
    return out


def trial_runs(trials: list[Trial]) -> dict[int, int]:
    """trial id -> the id of its workload's latest run (the one its metrics are in)."""
    by_workload = {t.workload_id: t.pk for t in trials if t.workload_id}
    out: dict[int, int] = {}
    for run_id, workload_id in Run.objects.filter(workload_id__in=by_workload).order_by(
            "workload_id", "attempt", "id").values_list("id", "workload_id"):
        out[by_workload[workload_id]] = run_id  # the last (highest attempt) wins
    return out
