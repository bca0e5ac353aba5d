"""Ingestion with a run token straight from ASGI, ahead of Django's middleware and URL routing.

Training jobs post a batch every fraction of a second each; on those requests Django's request
cycle (middleware, a thread for the sync-only middleware, URL resolution) costs several times
the work of storing the batch. `with_ingest_fast_path(app)` answers

    POST /api/v1/projects/<project>/runs/<id>/batches/   Authorization: Bearer cairnrun_...

itself, with exactly the logic and answers of the Django view (apps.tracking.api.fast.ingest),
and passes every other request to `app` unchanged. It keeps to the same rules as Django for
these requests: the Host header must be allowed (else Django answers), an HTTPS redirect Django
would make is left to Django, and the security headers of the middleware are set. It is only
active on PostgreSQL with TRACKING_DB_THREADS > 0; otherwise Django serves everything.
"""
from __future__ import annotations

import logging
import re

from django.conf import settings
from django.db import connections
from django.http.request import split_domain_port, validate_host

from .conf import setting

# apps.tracking.api.fast (models) is imported when first needed: this module is imported by the
# ASGI server before Django is set up.

logger = logging.getLogger(__name__)

# No control characters in the names: a path with one (a NUL would reach the database) is left to
# Django, whose middleware answers 404 (apps.core.middleware).
BATCHES = re.compile(r"/api/v1/projects/(?P<project>[^/\x00-\x1f\x7f]+)/runs/(?P<pk>[^/.\x00-\x1f\x7f]+)/batches/")


class _Disconnected(Exception):
    pass


def _headers(scope) -> dict[bytes, bytes]:
    return {name: value for name, value in scope.get("headers", ())}


def _eligible(scope, headers: dict[bytes, bytes]) -> bool:
    from .api.fast import is_run_token

    if setting("TRACKING_DB_THREADS") <= 0 or connections["default"].vendor != "postgresql":
        return False
    if headers.get(b"content-type", b"").split(b";")[0].strip().lower() != b"application/json":
        return False
    authorization = headers.get(b"authorization", b"")
    if not is_run_token(authorization.decode("latin-1")) or b"\x00" in authorization:
        return False  # a NUL: Django's middleware answers 400 (apps.core.middleware)
    host = headers.get(b"host", b"").decode("latin-1")
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS or (["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        return False  # Django answers 400
    if settings.SECURE_SSL_REDIRECT and scope.get("scheme") != "https":
        proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
        forwarded = headers.get(proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode()) if proxy else None
        if not proxy or forwarded is None or forwarded.decode("latin-1").split(",")[0].strip() != proxy[1]:
            return False  # Django redirects to HTTPS
    return True


def _security_headers() -> list[tuple[bytes, bytes]]:
    out = []
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        out.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        out.append((b"referrer-policy", (policy if isinstance(policy, str) else ",".join(policy)).encode()))
    if getattr(settings, "SECURE_CROSS_ORIGIN_OPENER_POLICY", None):
        out.append((b"cross-origin-opener-policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode()))
    out.append((b"x-frame-options", getattr(settings, "X_FRAME_OPTIONS", "DENY").encode()))
    return out


async def _serve(scope, receive, send, headers: dict[bytes, bytes], project: str, pk: str) -> None:
    from .api.fast import Answer, ingest

    async def read_body(limit: int) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            body = message.get("body", b"")
            if size <= limit:  # past the limit the rest is read and dropped
                chunks.append(body)
            size += len(body)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)[: limit + 1]

    token = headers[b"authorization"].decode("latin-1").split()[1]
    try:
        answer = await ingest(request=None, token=token, project=project, pk=pk, read_body=read_body)
    except _Disconnected:
        return
    except Exception:
        logger.exception("ingestion failed")
        answer = Answer(500, {"detail": "Server error."})
    content = answer.content()
    response_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode()),
                        *_security_headers(),
                        *((name.lower().encode(), value.encode()) for name, value in answer.headers.items())]
    await send({"type": "http.response.start", "status": answer.status, "headers": response_headers})
    await send({"type": "http.response.body", "body": content})


def with_ingest_fast_path(app):
    """Wrap the HTTP ASGI application `app` (Django's) with the ingestion fast path."""

    async def application(scope, receive, send):
        if scope["type"] == "http" and scope.get("method") == "POST":
            match = BATCHES.fullmatch(scope.get("path", ""))
            if match is not None:
                headers = _headers(scope)
                if _eligible(scope, headers):
                    await _serve(scope, receive, send, headers, match["project"], match["pk"])
                    return
        await app(scope, receive, send)

    return application

