"""Every write of tracking: runs, run tokens, ingestion (points, params, summaries, rollups)."""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from channels.layers import get_channel_layer
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.core.errors import ConflictError, ServiceError
from apps.core.realtime import publish
from apps.projects.models import Project
from apps.training.models import Checkpoint
from apps.training.services import checkpoint_record, replica_progress_record
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload

from . import downsample
from . import points as points_
from .choices import RunStatus, can_transition
from .conf import setting
from .events import metrics_event, project_runs_group, run_group, status_event, summary_event
from .models import IngestBatch, MetricChunk, MetricRollup, MetricSummary, Param, Run, RunToken
from .validation import Batch, Progress, check_key

logger = logging.getLogger(__name__)


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
    """Mark the run finished, failed or stopped (compare-and-set); finishing twice with the same
    status is a no-op."""
    if status not in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.STOPPED):
        raise ServiceError("status must be 'finished', 'failed' or 'stopped'.")
    if run.status == status:
        return run
    if not can_transition(run.status, status):
        raise ConflictError(f"The run is already {run.status}.")
    now = timezone.now()
    with transaction.atomic():
        updated = Run.objects.filter(pk=run.pk, status=run.status).update(status=status, finished_at=now)
        if updated:
            IngestBatch.objects.filter(run=run).delete()  # no more batches will come to deduplicate
            publish(run_group(run.pk), status_event(run_id=run.pk, status=status))
            publish(project_runs_group(run.project_id), status_event(run_id=run.pk, status=status))
    run.refresh_from_db()
    return run


def run_count_as_finished(*, run: Run) -> Run:
    """A run its workload's stop closed as stopped (or left running) whose script had in fact done
    all its work first (a sweep trial pruned after it ran to the end, apps/sweeps/driver.py): it
    says finished, so that every page showing it tells the same story. Its finished_at stays."""
    if run.status == RunStatus.FINISHED:
        return run
    with transaction.atomic():
        updated = Run.objects.filter(pk=run.pk, status__in=(RunStatus.STOPPED, RunStatus.RUNNING)).update(
            status=RunStatus.FINISHED, finished_at=run.finished_at or timezone.now())
        if updated:
            publish(run_group(run.pk), status_event(run_id=run.pk, status=RunStatus.FINISHED))
            publish(project_runs_group(run.project_id), status_event(run_id=run.pk, status=RunStatus.FINISHED))
    run.refresh_from_db()
    return run


def tracking_prune_batch_ids(*, now: datetime | None = None, chunk: int = 50_000) -> int:
    """Delete batch ids older than TRACKING_BATCH_ID_RETENTION_HOURS, in chunks (short
    transactions beside the ingestion); returns how many went."""
    cut = (now or timezone.now()) - timedelta(hours=setting("TRACKING_BATCH_ID_RETENTION_HOURS"))
    deleted = 0
    while True:
        ids = list(IngestBatch.objects.filter(created_at__lt=cut).values_list("pk", flat=True)[:chunk])
        if not ids:
            return deleted
        deleted += IngestBatch.objects.filter(pk__in=ids).delete()[0]


def run_delete(*, run: Run) -> None:
    with transaction.atomic():
        MetricChunk.objects.filter(run=run).delete()
        MetricRollup.objects.filter(run=run).delete()
        IngestBatch.objects.filter(run=run).delete()
        run.delete()


def run_ingest(*, run: Run, batch: Batch) -> IngestResult:
    """Store a validated batch in one transaction: points, params, summaries, rollups.

    A batch id already stored for this run is acknowledged without storing anything again.
    Live subscribers get the points after commit."""
    if run.status != RunStatus.RUNNING:
        raise ConflictError(f"The run is {run.status}; it no longer accepts data.")
    points = batch.points
    rows = ingest_rows(points)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            outcome = _ingest_statement(run_id=run.pk, batch=batch, rows=rows, token_id=None)
            if outcome is None or outcome.status != RunStatus.RUNNING:  # finished meanwhile
                raise ConflictError(f"The run is {outcome.status if outcome else 'gone'}; it no longer accepts data.")
            if outcome.duplicate:
                return IngestResult(points=0, params=0, duplicate=True)
        else:
            if batch.batch_id is not None:
                try:
                    with transaction.atomic():
                        IngestBatch.objects.create(run=run, batch_id=batch.batch_id, points=len(points))
                except IntegrityError:
                    return IngestResult(points=0, params=0, duplicate=True)
            if points:
                _chunks_insert(run_id=run.pk, chunks=rows.chunks)
                _summaries_upsert(run_id=run.pk, rows=rows.summaries)
                _rollups_upsert(run_id=run.pk, rows=rows.rollups)
            if batch.params:
                _params_upsert(run=run, params=batch.params)
        if batch.progress is not None:
            run_progress_record(run_id=run.pk, progress=batch.progress)
        if points:
            publish(run_group(run.pk), metrics_event(run_id=run.pk, by_key=rows.by_key))
            publish(project_runs_group(run.project_id), summary_event(run_id=run.pk, latest=rows.latest()))
    return IngestResult(points=len(points), params=len(batch.params), duplicate=False)


async def points_publish(*, run_id: int, project_id: int, rows: IngestRows, coalesce_project: bool = False) -> None:
    """Send the points of a committed batch to the run's live subscribers, and its latest values
    to the project's, from async code (where run_ingest's on_commit is not).

    `coalesce_project` (a long-lived event loop: the ASGI server) gathers the project's latest
    values of every run for TRACKING_LIVE_PROJECT_WINDOW seconds into one event: project views
    are coalesced to a few frames per second anyway, and a project with many runs logging fast
    would otherwise cost one channel-layer send per batch for them."""
    layer = get_channel_layer()
    if layer is None:
        return
    sends = [layer.group_send(run_group(run_id), {"type": "cairn.event",
                                                  "event": metrics_event(run_id=run_id, by_key=rows.by_key)})]
    if coalesce_project:
        _latest_later(layer, project_id, run_id, rows.latest())
    else:
        sends.append(layer.group_send(project_runs_group(project_id), {
            "type": "cairn.event", "event": summary_event(run_id=run_id, latest=rows.latest())}))
    try:
        await asyncio.gather(*sends)
    except Exception as exc:  # noqa: BLE001 - realtime is best effort; the database is the truth
        logger.warning("realtime: could not publish the points of run %s: %s", run_id, exc)


_latest_pending: dict[asyncio.AbstractEventLoop, dict[int, dict[str, dict[str, list]]]] = {}


def _latest_later(layer, project_id: int, run_id: int, latest: dict[str, list]) -> None:
    loop = asyncio.get_running_loop()
    pending = _latest_pending.setdefault(loop, {})
    runs = pending.get(project_id)
    if runs is None:
        pending[project_id] = runs = {}
        loop.call_later(setting("TRACKING_LIVE_PROJECT_WINDOW"),
                        lambda: loop.create_task(_latest_flush(layer, project_id, pending)))
    mine = runs.setdefault(str(run_id), {})
    for key, row in latest.items():
        if key not in mine or row[0] >= mine[key][0]:
            mine[key] = row


async def _latest_flush(layer, project_id: int, pending: dict) -> None:
    runs = pending.pop(project_id, None)
    if not runs:
        return
    try:
        await layer.group_send(project_runs_group(project_id), {"type": "cairn.event",
                                                                "event": {"type": "run.latest", "runs": runs}})
    except Exception as exc:  # noqa: BLE001
        logger.warning("realtime: could not publish the latest values of project %s: %s", project_id, exc)


@dataclass
class TokenIngestOutcome:
    """What the single ingest statement found: the run's status (None: no such run), whether the
    token is valid (None: gone, False: revoked) and whether the batch id was already stored."""

    status: str | None
    token_valid: bool | None
    duplicate: bool


def run_ingest_with_token(*, token_id: int, run_id: int, batch: Batch, rows: IngestRows) -> TokenIngestOutcome:
    """The ingestion hot path (PostgreSQL, autocommit): one statement checks that the token is
    still valid and the run still running, stores the batch and tells what it found. Nothing is
    stored when a check fails. The caller publishes the points once this returns (committed)."""
    outcome = _ingest_statement(run_id=run_id, batch=batch, rows=rows, token_id=token_id)
    return outcome or TokenIngestOutcome(status=None, token_valid=None, duplicate=False)


@dataclass
class IngestRows:
    """A batch prepared for storage: per-key summaries and every rollup block it touches."""

    by_key: dict[str, list[tuple[int, float, float]]]  # (step, value, time) sorted by step
    chunks: list[tuple[str, points_.Packed]]  # one per key
    summaries: list[tuple]  # (key, count, min, max, first_step, last_step, last_value, last_time)
    rollups: list[tuple]  # (key, level, bucket, count, first_step, first_value, last_step, last_value,
    #                        min_step, min_value, max_step, max_value), sorted (one lock order for all writers)

    def latest(self) -> dict[str, list]:
        """The point of the highest step per key (the latest logged among equal steps)."""
        return {s[0]: [s[5], s[6], s[7]] for s in self.summaries}


def ingest_rows(points: list[tuple[str, int, float, float]]) -> IngestRows:
    by_key: dict[str, list[tuple[int, float, float]]] = {}
    for key, step, value, when in points:
        rows = by_key.get(key)
        if rows is None:
            by_key[key] = rows = []
        rows.append((step, value, when))
    chunks, summaries, rollups = [], [], []
    for key in sorted(by_key):
        rows = by_key[key]
        rows.sort(key=_first)  # stable: equal steps keep their arrival order
        chunks.append((key, points_.pack(rows)))
        values = [r[1] for r in rows]
        last = rows[-1]
        summaries.append((key, len(rows), min(values), max(values), rows[0][0], last[0], last[1], last[2]))
        rollups.extend((key, level, bucket, *agg) for level, bucket, agg in downsample.key_rollups(rows))
    rollups.sort(key=_rollup_order)
    return IngestRows(by_key=by_key, chunks=chunks, summaries=summaries, rollups=rollups)


def _first(row):
    return row[0]


def _rollup_order(row):
    return row[0], row[1], row[2]


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


def _chunks_insert(*, run_id: int, chunks) -> None:
    """SQLite (embedded mode); PostgreSQL uses _statement_sql."""
    MetricChunk.objects.bulk_create([
        MetricChunk(run_id=run_id, key=key, first_step=c.first_step, last_step=c.last_step, count=c.count,
                    step_data=c.step_data, value_data=c.value_data, time_data=c.time_data)
        for key, c in chunks
    ])


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


def _summaries_upsert(*, run_id: int, rows: list[tuple]) -> None:
    """SQLite (embedded mode); PostgreSQL uses _statement_sql."""
    t = MetricSummary._meta.db_table
    newer = f"EXCLUDED.last_step >= {t}.last_step"
    _upsert(
        t, ["run_id", "key", "count", "min", "max", "first_step", "last_step", "last_value", "last_time"],
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
        [(run_id, *row[:7], _epoch(row[7])) for row in rows],
    )


def _rollups_upsert(*, run_id: int, rows: list[tuple]) -> None:
    """SQLite (embedded mode); PostgreSQL uses _statement_sql."""
    t = MetricRollup._meta.db_table

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
        [(run_id, *row) for row in rows],
    )


_STATEMENTS: dict[tuple[bool, bool, bool, bool], str] = {}


def _statement_sql(*, token: bool, batch_id: bool, points: bool, params: bool) -> str:
    """The SQL of one ingest: data-modifying CTEs gated on the run (and token) checks and on the
    batch id being new; every part runs or none does, atomically, in one round trip."""
    key = (token, batch_id, points, params)
    sql = _STATEMENTS.get(key)
    if sql is not None:
        return sql
    run_t, token_t = Run._meta.db_table, RunToken._meta.db_table
    batch_t, chunk_t = IngestBatch._meta.db_table, MetricChunk._meta.db_table
    summary_t, rollup_t, param_t = MetricSummary._meta.db_table, MetricRollup._meta.db_table, Param._meta.db_table
    valid = (f"(SELECT t.revoked_at IS NULL FROM {token_t} t WHERE t.id = %(token)s AND t.run_id = r.id)"
             if token else "true")
    parts = [
        f"gate AS (SELECT r.status, {valid} AS valid FROM {run_t} r WHERE r.id = %(run)s)",
        f"ok AS (SELECT 1 FROM gate WHERE status = '{RunStatus.RUNNING}' AND valid)",
        (f"go AS (INSERT INTO {batch_t} (run_id, batch_id, points, created_at) "
         f"SELECT %(run)s, %(batch_id)s, %(count)s, now() FROM ok "
         f"ON CONFLICT (run_id, batch_id) DO NOTHING RETURNING 1)") if batch_id else "go AS (SELECT 1 FROM ok)",
    ]
    if points:
        later = newer = "EXCLUDED.last_step >= t.last_step"

        def pick(cond: str, column: str) -> str:
            return f"{column} = CASE WHEN {cond} THEN EXCLUDED.{column} ELSE t.{column} END"

        parts += [
            (f"c AS (INSERT INTO {chunk_t} (run_id, key, first_step, last_step, count, step_data, value_data, "
             f"time_data) SELECT %(run)s, (%(keys)s::text[])[u.k], u.f, u.l, u.c, "
             f"substring(%(blob)b FROM u.o + 1 FOR 8 * u.c), substring(%(blob)b FROM u.o + 1 + 8 * u.c FOR 8 * u.c), "
             f"substring(%(blob)b FROM u.o + 1 + 16 * u.c FOR 8 * u.c) "
             f"FROM unnest(%(c_key)s::int4[], %(c_first)s::int8[], %(c_last)s::int8[], %(c_count)s::int4[], "
             f"%(c_offset)s::int4[]) AS u(k, f, l, c, o) WHERE EXISTS (SELECT 1 FROM go))"),
            (f"s AS (INSERT INTO {summary_t} AS t (run_id, key, count, min, max, first_step, last_step, last_value, "
             f"last_time) SELECT %(run)s, (%(keys)s::text[])[u.k], u.c, u.lo, u.hi, u.fs, u.ls, u.lv, "
             f"to_timestamp(u.lt) FROM unnest(%(s_key)s::int4[], %(s_count)s::int8[], %(s_min)s::float8[], %(s_max)s::float8[], "
             f"%(s_first)s::int8[], %(s_last)s::int8[], %(s_value)s::float8[], %(s_time)s::float8[]) "
             f"AS u(k, c, lo, hi, fs, ls, lv, lt) WHERE EXISTS (SELECT 1 FROM go) "
             f"ON CONFLICT (run_id, key) DO UPDATE SET count = t.count + EXCLUDED.count, "
             f"min = LEAST(t.min, EXCLUDED.min), max = GREATEST(t.max, EXCLUDED.max), "
             f"first_step = LEAST(t.first_step, EXCLUDED.first_step), "
             f"{pick(newer, 'last_step')}, {pick(newer, 'last_value')}, {pick(newer, 'last_time')})"),
            (f"ru AS (INSERT INTO {rollup_t} AS t (run_id, key, level, bucket, count, first_step, first_value, "
             f"last_step, last_value, min_step, min_value, max_step, max_value) "
             f"SELECT %(run)s, (%(keys)s::text[])[u.k], u.l, u.b, u.c, u.fs, u.fv, u.ls, u.lv, u.mins, u.minv, "
             f"u.maxs, u.maxv FROM unnest(%(r_key)s::int4[], %(r_level)s::int2[], %(r_bucket)s::int8[], "
             f"%(r_count)s::int8[], %(r_fs)s::int8[], %(r_fv)s::float8[], %(r_ls)s::int8[], %(r_lv)s::float8[], "
             f"%(r_mins)s::int8[], %(r_minv)s::float8[], %(r_maxs)s::int8[], %(r_maxv)s::float8[]) "
             f"AS u(k, l, b, c, fs, fv, ls, lv, mins, minv, maxs, maxv) "
             f"WHERE EXISTS (SELECT 1 FROM go) "
             f"ON CONFLICT (run_id, key, level, bucket) DO UPDATE SET count = t.count + EXCLUDED.count, "
             f"{pick('EXCLUDED.first_step < t.first_step', 'first_step')}, "
             f"{pick('EXCLUDED.first_step < t.first_step', 'first_value')}, "
             f"{pick(later, 'last_step')}, {pick(later, 'last_value')}, "
             f"{pick('EXCLUDED.min_value < t.min_value', 'min_step')}, "
             f"{pick('EXCLUDED.min_value < t.min_value', 'min_value')}, "
             f"{pick('EXCLUDED.max_value > t.max_value', 'max_step')}, "
             f"{pick('EXCLUDED.max_value > t.max_value', 'max_value')})"),
        ]
    if params:
        parts.append(
            f"pa AS (INSERT INTO {param_t} AS t (run_id, key, value) "
            f"SELECT %(run)s, u.k, u.v FROM unnest(%(pa_key)s::text[], %(pa_value)s::jsonb[]) AS u(k, v) "
            f"WHERE EXISTS (SELECT 1 FROM go) ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value)"
        )
    sql = "WITH " + ",\n".join(parts) + "\nSELECT g.status, g.valid, NOT EXISTS (SELECT 1 FROM go) FROM gate g"
    _STATEMENTS[key] = sql
    return sql


def _array(numbers) -> str:
    """A PostgreSQL array literal of ints or finite floats (repr round-trips a float exactly)."""
    return "{" + ",".join(map(repr, numbers)) + "}"


def _text_array(texts) -> str:
    return "{" + ",".join('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in texts) + "}"


def _ingest_statement(*, run_id: int, batch: Batch, rows: IngestRows, token_id: int | None):
    """Run the ingest statement on Django's connection (in its transaction, if any), with
    server-side parameters: the arrays travel in binary, not as SQL text."""
    import psycopg
    from psycopg.types.json import Jsonb

    points = batch.points
    args: dict = {"run": run_id, "token": token_id, "batch_id": batch.batch_id, "count": len(points)}
    if points:
        # Number arrays travel as PostgreSQL array literals built with str.join (psycopg's list
        # dumpers are pure Python), keys as indexes into the batch's distinct keys, points packed.
        keys = [row[0] for row in rows.summaries]
        index = {key: i for i, key in enumerate(keys, 1)}
        chunks = [c for _, c in rows.chunks]
        offsets, offset = [], 0
        for c in chunks:  # one bytea for all: steps, values, times of each chunk in turn
            offsets.append(offset)
            offset += 24 * c.count
        args.update(keys=_text_array(keys), c_key=_array(range(1, len(keys) + 1)),
                    c_first=_array([c.first_step for c in chunks]), c_last=_array([c.last_step for c in chunks]),
                    c_count=_array([c.count for c in chunks]), c_offset=_array(offsets),
                    blob=b"".join(part for c in chunks for part in (c.step_data, c.value_data, c.time_data)))
        columns = list(zip(*rows.summaries, strict=True))
        for name, column in zip(("s_key", "s_count", "s_min", "s_max", "s_first", "s_last", "s_value", "s_time"),
                                columns, strict=True):
            args[name] = _array([index[k] for k in column] if name == "s_key" else column)
        columns = list(zip(*rows.rollups, strict=True))
        for name, column in zip(("r_key", "r_level", "r_bucket", "r_count", "r_fs", "r_fv", "r_ls", "r_lv", "r_mins",
                                 "r_minv", "r_maxs", "r_maxv"), columns, strict=True):
            args[name] = _array([index[k] for k in column] if name == "r_key" else column)
    if batch.params:
        args["pa_key"] = list(batch.params)
        args["pa_value"] = [Jsonb(v) for v in batch.params.values()]
    sql = _statement_sql(token=token_id is not None, batch_id=batch.batch_id is not None, points=bool(points),
                         params=bool(batch.params))
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, args, prepare=True)  # planned once per connection (Django never prepares)
        row = cursor.fetchone()
    if row is None:
        return None
    return TokenIngestOutcome(status=row[0], token_valid=row[1], duplicate=row[2] and row[0] == RunStatus.RUNNING
                              and bool(row[1]))



def run_progress_record(*, run_id: int, progress: Progress) -> None:
    """Hand a rank's progress to training (kept per workload and rank); standalone runs keep none."""
    found = Run.objects.filter(pk=run_id, workload__isnull=False).values_list("workload_id", "attempt").first()
    if found is None or found[1] is None:
        return
    replica_progress_record(workload_id=found[0], attempt=found[1], replica=progress.replica, step=progress.step,
                            steps=progress.steps, done=progress.done)


def run_checkpoint_report(
    *, run: Run, step: int, size_bytes: int, save_seconds: float, blocking_seconds: float, replica: int = 0,
    name: str = "", sha256: str = "", two_stage: bool = False,
) -> Checkpoint:
    """A checkpoint the SDK saved in this run: recorded on the run's training job (409 for a
    standalone run or a finished one)."""
    if run.status != RunStatus.RUNNING:
        raise ConflictError(f"The run is {run.status}; it no longer accepts data.")
    if run.workload_id is None or run.attempt is None:
        raise ConflictError("This run belongs to no workload: checkpoints are recorded for training jobs.")
    workload = Workload.objects.select_related("project").get(pk=run.workload_id)
    return checkpoint_record(workload=workload, attempt=run.attempt, replica=replica, step=step,
                             size_bytes=size_bytes, save_seconds=save_seconds, blocking_seconds=blocking_seconds,
                             name=name, sha256=sha256, two_stage=two_stage)


def run_env_for_attempt(*, workload: Workload, attempt: int) -> dict[str, str]:
    """What a replica's `cairn.init()` needs to log into the run of this attempt: the run id and a
    fresh write-only run token (CAIRN_RUN_ID, CAIRN_RUN_TOKEN). Called by the backends at launch."""
    run = run_for_attempt(workload=workload, attempt=attempt)
    return {"CAIRN_RUN_ID": str(run.pk), "CAIRN_RUN_TOKEN": run_token_create(run=run)}


def runs_close_for_workload(*, workload: Workload, workload_status: str) -> int:
    """Close the runs a workload's attempt left open when the attempt ends (exit, stop,
    preemption, loss): a killed script never calls finish, and its run would say "running"
    forever. The SDK flushes before its process exits, and the attempt only ends after that.
    The run says what happened to the workload: finished when it succeeded, stopped when it was
    stopped, failed otherwise (failed, lost, or requeued after a preemption or a lost node)."""
    status = {WorkloadStatus.SUCCEEDED: RunStatus.FINISHED,
              WorkloadStatus.STOPPED: RunStatus.STOPPED}.get(workload_status, RunStatus.FAILED)
    closed = 0
    for run in Run.objects.filter(workload=workload, status=RunStatus.RUNNING):
        run_finish(run=run, status=status)
        closed += 1
    return closed
