"""Every write of tracking: runs, run tokens, ingestion (points, params, summaries, rollups)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.core.errors import ConflictError, ServiceError
from apps.core.realtime import publish
from apps.projects.models import Project
from apps.workloads.models import Workload

from . import downsample
from .choices import RunStatus, can_transition
from .events import metrics_event, project_runs_group, run_group, status_event, summary_event
from .models import IngestBatch, MetricPoint, MetricRollup, MetricSummary, Param, Run, RunToken
from .validation import Batch, check_key


@dataclass
class IngestResult:
    points: int
    params: int
    duplicate: bool


def run_create(
    *, project: Project, name: str = "", created_by=None, client_id: uuid.UUID | None = None,
    params: dict | None = None,
) -> tuple[Run, bool]:
    """Create a standalone run (idempotent on `client_id`). Returns (run, created)."""
    if client_id is not None:
        existing = Run.objects.filter(project=project, client_id=client_id).first()
        if existing is not None:
            return existing, False
    try:
        with transaction.atomic():
            run = Run.objects.create(project=project, name=name or "", created_by=created_by, client_id=client_id)
            if not run.name:
                run.name = f"run-{run.pk}"
                Run.objects.filter(pk=run.pk).update(name=run.name)
            if params:
                _params_upsert(run=run, params=params)
    except IntegrityError:  # the same client_id raced in
        return Run.objects.get(project=project, client_id=client_id), False
    return run, True


def run_for_attempt(*, workload: Workload, attempt: int) -> Run:
    """The run of one workload attempt, made at launch (idempotent)."""
    run, _ = Run.objects.get_or_create(
        workload=workload, attempt=attempt,
        defaults={"project_id": workload.project_id, "name": f"{workload.name}-attempt-{attempt}",
                  "created_by_id": workload.created_by_id},
    )
    return run


def run_token_create(*, run: Run) -> str:
    """A new write-only token for `run`; returns the full secret, which is not stored."""
    prefix, secret, full = RunToken.generate()
    RunToken.objects.create(run=run, prefix=prefix, secret_hash=RunToken.hash_secret(secret))
    return full


def run_token_revoke_all(*, run: Run) -> int:
    return RunToken.objects.filter(run=run, revoked_at__isnull=True).update(revoked_at=timezone.now())


def run_finish(*, run: Run, status: str = RunStatus.FINISHED) -> Run:
    """Mark the run finished or failed (compare-and-set); finishing twice with the same status is a no-op."""
    if status not in (RunStatus.FINISHED, RunStatus.FAILED):
        raise ServiceError("status must be 'finished' or 'failed'.")
    if run.status == status:
        return run
    if not can_transition(run.status, status):
        raise ConflictError(f"The run is already {run.status}.")
    now = timezone.now()
    with transaction.atomic():
        updated = Run.objects.filter(pk=run.pk, status=run.status).update(status=status, finished_at=now)
        if updated:
            publish(run_group(run.pk), status_event(run_id=run.pk, status=status))
            publish(project_runs_group(run.project_id), status_event(run_id=run.pk, status=status))
    run.refresh_from_db()
    return run


def run_delete(*, run: Run) -> None:
    with transaction.atomic():
        MetricPoint.objects.filter(run=run).delete()
        MetricRollup.objects.filter(run=run).delete()
        IngestBatch.objects.filter(run=run).delete()
        run.delete()


def run_ingest(*, run: Run, batch: Batch) -> IngestResult:
    """Store a validated batch in one transaction: points (COPY), params, summaries, rollups.

    A batch id already stored for this run is acknowledged without storing anything again.
    Live subscribers get the points after commit."""
    if run.status != RunStatus.RUNNING:
        raise ConflictError(f"The run is {run.status}; it no longer accepts data.")
    points = batch.points
    with transaction.atomic():
        if batch.batch_id is not None:
            try:
                with transaction.atomic():
                    IngestBatch.objects.create(run=run, batch_id=batch.batch_id, points=len(points))
            except IntegrityError:
                return IngestResult(points=0, params=0, duplicate=True)
        if points:
            _points_insert(run_id=run.pk, points=points)
            _summaries_upsert(run_id=run.pk, points=points)
            _rollups_upsert(run_id=run.pk, points=points)
        if batch.params:
            _params_upsert(run=run, params=batch.params)
        if points:
            publish(run_group(run.pk), metrics_event(run_id=run.pk, points=points))
            publish(project_runs_group(run.project_id), summary_event(run_id=run.pk, points=points))
    return IngestResult(points=len(points), params=len(batch.params), duplicate=False)


def run_params_set(*, run: Run, params: dict) -> None:
    for key in params:
        check_key(key, f"params[{key[:50]!r}]")
    _params_upsert(run=run, params=params)


def _params_upsert(*, run: Run, params: dict) -> None:
    Param.objects.bulk_create(
        [Param(run=run, key=k, value=v) for k, v in params.items()],
        update_conflicts=True, unique_fields=["run", "key"], update_fields=["value"],
    )


def _epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _points_insert(*, run_id: int, points) -> None:
    if connection.vendor == "postgresql":
        table = MetricPoint._meta.db_table
        with connection.cursor() as cursor:
            raw = cursor.cursor  # the psycopg 3 cursor under Django's wrapper
            with raw.copy(f"COPY {table} (run_id, key, step, value, time) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "text", "int8", "float8", "timestamptz"])
                for key, step, value, when in points:
                    copy.write_row((run_id, key, step, value, _epoch(when)))
        return
    MetricPoint.objects.bulk_create(
        [MetricPoint(run_id=run_id, key=k, step=s, value=v, time=_epoch(t)) for k, s, v, t in points],
        batch_size=2000,
    )


def _least(a: str, b: str) -> str:
    return f"LEAST({a}, {b})" if connection.vendor == "postgresql" else f"MIN({a}, {b})"


def _greatest(a: str, b: str) -> str:
    return f"GREATEST({a}, {b})" if connection.vendor == "postgresql" else f"MAX({a}, {b})"


def _upsert(table: str, columns: list[str], conflict: list[str], updates: list[str], rows: list[tuple]) -> None:
    if not rows:
        return
    placeholder = "(" + ", ".join(["%s"] * len(columns)) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 2000):
            chunk = rows[start:start + 2000]
            sql = (
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([placeholder] * len(chunk))} "
                f"ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {', '.join(updates)}"
            )
            cursor.execute(sql, [value for row in chunk for value in row])


def _summaries_upsert(*, run_id: int, points) -> None:
    table = MetricSummary._meta.db_table
    per_key: dict[str, list] = {}
    for key, step, value, when in points:
        s = per_key.get(key)
        if s is None:
            per_key[key] = [1, value, value, step, step, value, when]
            continue
        s[0] += 1
        s[1] = min(s[1], value)
        s[2] = max(s[2], value)
        s[3] = min(s[3], step)
        if step >= s[4]:
            s[4], s[5], s[6] = step, value, when
    rows = [(run_id, key, s[0], s[1], s[2], s[3], s[4], s[5], _epoch(s[6])) for key, s in sorted(per_key.items())]
    t = table
    newer = f"EXCLUDED.last_step >= {t}.last_step"
    _upsert(
        table, ["run_id", "key", "count", "min", "max", "first_step", "last_step", "last_value", "last_time"],
        ["run_id", "key"],
        [
            f"count = {t}.count + EXCLUDED.count",
            f"min = {_least(f'{t}.min', 'EXCLUDED.min')}",
            f"max = {_greatest(f'{t}.max', 'EXCLUDED.max')}",
            f"first_step = {_least(f'{t}.first_step', 'EXCLUDED.first_step')}",
            f"last_step = CASE WHEN {newer} THEN EXCLUDED.last_step ELSE {t}.last_step END",
            f"last_value = CASE WHEN {newer} THEN EXCLUDED.last_value ELSE {t}.last_value END",
            f"last_time = CASE WHEN {newer} THEN EXCLUDED.last_time ELSE {t}.last_time END",
        ],
        rows,
    )


def _rollups_upsert(*, run_id: int, points) -> None:
    t = MetricRollup._meta.db_table
    aggs = downsample.rollups((key, step, value) for key, step, value, _ in points)
    rows = [(run_id, key, level, bucket, *agg) for (key, level, bucket), agg in sorted(aggs.items())]

    def pick(cond: str, column: str) -> str:
        return f"{column} = CASE WHEN {cond} THEN EXCLUDED.{column} ELSE {t}.{column} END"

    earlier = f"EXCLUDED.first_step < {t}.first_step"
    later = f"EXCLUDED.last_step >= {t}.last_step"
    lower = f"EXCLUDED.min_value < {t}.min_value"
    higher = f"EXCLUDED.max_value > {t}.max_value"
    _upsert(
        t,
        ["run_id", "key", "level", "bucket", "count", "first_step", "first_value", "last_step", "last_value",
         "min_step", "min_value", "max_step", "max_value"],
        ["run_id", "key", "level", "bucket"],
        [
            f"count = {t}.count + EXCLUDED.count",
            pick(earlier, "first_step"), pick(earlier, "first_value"),
            pick(later, "last_step"), pick(later, "last_value"),
            pick(lower, "min_step"), pick(lower, "min_value"),
            pick(higher, "max_step"), pick(higher, "max_value"),
        ],
        rows,
    )


def run_env_for_attempt(*, workload: Workload, attempt: int) -> dict[str, str]:
    """What a replica's `cairn.init()` needs to log into the run of this attempt: the run id and a
    fresh write-only run token (CAIRN_RUN_ID, CAIRN_RUN_TOKEN). Called by the backends at launch."""
    run = run_for_attempt(workload=workload, attempt=attempt)
    return {"CAIRN_RUN_ID": str(run.pk), "CAIRN_RUN_TOKEN": run_token_create(run=run)}
