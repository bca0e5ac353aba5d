"""Async entry points of the tracking endpoints.

Every RunViewSet route (but CSV export) is served by an async view that runs the DRF view on
one of tracking's long-lived database threads (see ..dbthreads): same authentication,
permissions, validation and answers, without a new PostgreSQL connection per request.

Ingestion with a run token (what the SDK sends, thousands of times a minute) skips DRF
altogether on PostgreSQL: the token is checked against a short-lived per-process cache of its
hash, the body parsed with orjson and validated on the event loop, and one SQL statement
re-checks the token and the run's status while it stores the batch (nothing is stored when a
check fails). Its answers are those of the DRF view: 401 bad or revoked token, 429 over the
rate, 404 another run, 413 body too large, 400 naming the first bad item, 409 run finished.
Anything else (session, API tokens, other content types, SQLite) takes the DRF view.
"""
from __future__ import annotations

import functools
import hmac
import logging
import time
from dataclasses import dataclass, field

import orjson
from django.db import connections
from django.http import HttpResponse
from django.template.response import SimpleTemplateResponse
from rest_framework.exceptions import Throttled

from apps.core.errors import ServiceError

from ..choices import RunStatus
from ..conf import setting
from ..dbthreads import run_sync, uses_pool
from ..models import RUN_TOKEN_PREFIX, RunToken
from ..services import ingest_rows, points_publish, run_ingest_with_token, run_progress_record
from ..throttling import ingest_wait, run_token_identity
from ..validation import parse_batch

logger = logging.getLogger(__name__)


# ---- DRF views on the database threads ------------------------------------------------------------

def _call_view(view, request, args, kwargs, plain: bool):
    response = view(request, *args, **kwargs)
    if isinstance(response, SimpleTemplateResponse):
        response.render()
        if plain:  # rendered here: spare Django a hop back to the request thread just to see that
            rendered = HttpResponse(response.content, status=response.status_code)
            for header, value in response.items():
                rendered.headers[header] = value
            rendered.cookies = response.cookies
            return rendered
    return response


def tracking_view(view, *, fast=None):
    """An async view running the DRF `view` through dbthreads.run_sync; `fast(request, **kwargs)`,
    when given, may answer first (it returns None to hand the request to the DRF view)."""

    async def async_view(request, *args, **kwargs):
        if fast is not None:
            response = await fast(request, **kwargs)
            if response is not None:
                return response
        return await run_sync(request, _call_view, view, request, args, kwargs, uses_pool(request))

    functools.update_wrapper(async_view, view)  # keeps cls, actions, initkwargs (schema) and csrf_exempt
    return async_view


# ---- ingestion with a run token ---------------------------------------------------------------------

@dataclass(frozen=True)
class _TokenEntry:
    token_id: int
    secret_hash: str
    revoked: bool
    run_id: int
    project_id: int
    project_slug: str
    expires: float


_tokens: dict[str, _TokenEntry] = {}
_TOKENS_MAX = 10_000


def _token_lookup(prefix: str) -> _TokenEntry | None:
    row = (RunToken.objects.filter(prefix=prefix)
           .values_list("id", "secret_hash", "revoked_at", "run_id", "run__project_id", "run__project__slug").first())
    if row is None:
        return None
    token_id, secret_hash, revoked_at, run_id, project_id, slug = row
    return _TokenEntry(token_id=token_id, secret_hash=secret_hash, revoked=revoked_at is not None, run_id=run_id,
                       project_id=project_id, project_slug=slug,
                       expires=time.monotonic() + setting("TRACKING_RUN_TOKEN_CACHE_SECONDS"))


async def _token_entry(request, prefix: str) -> _TokenEntry | None:
    entry = _tokens.get(prefix)
    if entry is not None and entry.expires > time.monotonic():
        return entry
    entry = await run_sync(request, _token_lookup, prefix)
    if entry is None:
        _tokens.pop(prefix, None)
        return None
    if len(_tokens) >= _TOKENS_MAX:
        _tokens.clear()
    _tokens[prefix] = entry
    return entry


def forget_token(prefix: str) -> None:
    _tokens.pop(prefix, None)


@dataclass
class Answer:
    status: int
    body: dict
    headers: dict[str, str] = field(default_factory=dict)

    def content(self) -> bytes:
        return orjson.dumps(self.body)


def _error(status: int, detail: str, headers: dict | None = None) -> Answer:
    return Answer(status, {"detail": detail}, headers or {})


def _unauthorized(detail: str) -> Answer:
    return _error(401, detail, {"WWW-Authenticate": "Bearer"})


def is_run_token(authorization: str) -> bool:
    parts = authorization.split()
    return len(parts) == 2 and parts[0] == "Bearer" and parts[1].startswith(RUN_TOKEN_PREFIX)


async def ingest(*, request, token: str, project: str, pk: str, read_body) -> Answer:
    """Ingest one batch sent with a run token (`Bearer cairnrun_...`), whatever carried it:
    `read_body(limit)` returns at most limit + 1 bytes of the body. `request` is the Django
    request, or None from the ASGI entry (apps.tracking.asgi)."""
    prefix, _, secret = token[len(RUN_TOKEN_PREFIX):].partition("_")
    if not prefix or not secret:
        return _unauthorized("Invalid run token.")
    entry = await _token_entry(request, prefix)
    if entry is None or not hmac.compare_digest(entry.secret_hash, RunToken.hash_secret(secret)):
        return _unauthorized("Invalid run token.")
    if entry.revoked:
        return _unauthorized("This run token has been revoked.")
    wait = ingest_wait(run_token_identity(prefix))
    if wait is not None:
        throttled = Throttled(wait)
        return _error(429, str(throttled.detail), {"Retry-After": str(throttled.wait)})
    if entry.project_slug != project or str(entry.run_id) != str(pk):
        return _error(404, "Run not found.")

    limit = setting("TRACKING_INGEST_MAX_BYTES")
    raw = await read_body(limit)
    if len(raw) > limit:
        return _error(413, f"Request body is larger than {limit} bytes; send smaller batches.")
    try:
        data = orjson.loads(raw) if raw else {}
        batch = parse_batch(data, now=time.time())
    except orjson.JSONDecodeError as exc:
        return _error(400, f"JSON parse error - {exc}")
    except ServiceError as exc:
        return _error(exc.status_code, exc.detail)
    rows = ingest_rows(batch.points)

    outcome = await run_sync(request, run_ingest_with_token, token_id=entry.token_id, run_id=entry.run_id,
                             batch=batch, rows=rows)
    if not outcome.token_valid:
        forget_token(prefix)
        return _unauthorized("Invalid run token." if outcome.token_valid is None else "This run token has been revoked.")
    if outcome.status != RunStatus.RUNNING:
        return _error(409, f"The run is {outcome.status}; it no longer accepts data.")
    if outcome.duplicate:
        return Answer(200, {"points": 0, "params": 0, "duplicate": True})
    if batch.progress is not None:
        await run_sync(request, run_progress_record, run_id=entry.run_id, progress=batch.progress)
    if batch.points:
        await points_publish(run_id=entry.run_id, project_id=entry.project_id, rows=rows,
                             coalesce_project=uses_pool(request))
    return Answer(200, {"points": len(batch.points), "params": len(batch.params), "duplicate": False})


async def batches(request, project=None, pk=None) -> HttpResponse | None:
    """The Django view's fast path: run tokens on PostgreSQL; None hands the request to DRF."""
    if request.method != "POST" or request.content_type != "application/json":
        return None
    authorization = request.META.get("HTTP_AUTHORIZATION", "")
    if not is_run_token(authorization) or connections["default"].vendor != "postgresql":
        return None

    async def read_body(limit: int) -> bytes:
        return request.read(limit + 1)

    answer = await ingest(request=request, token=authorization.split()[1], project=project, pk=pk,
                          read_body=read_body)
    return HttpResponse(answer.content(), status=answer.status, content_type="application/json",
                        headers=answer.headers)
