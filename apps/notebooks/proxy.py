"""Cairn's notebook proxy: `/nb/<project>/<workload id>/...` to the notebook's IDE, HTTP and websockets.

Answered from ASGI ahead of Django (`with_notebook_proxy(http_app, websocket_app)` in
config/asgi.py), so that bodies stream both ways and kernel/terminal websockets pass frame by
frame (apps/core/proxy.py moves the bytes). Who may pass is access.py's decision, made per
request and per websocket upgrade. The proxy adds the upstream credential (Jupyter's token) to
what it forwards; the visitor never sees it, and Cairn's own credentials (the Authorization
header, the session and CSRF cookies) never reach the notebook.

- Anonymous: a browser's page load is redirected to the sign-in page (back here after it),
  anything else gets 401.
- An open (a page load, or a first websocket of an API client) is an audit event `notebook.open`,
  at most once a minute per user and notebook in this process.
- The IDE's answers may not set cookies for the rest of Cairn's origin: Set-Cookie is dropped.
- An open websocket (a kernel's, a terminal's) is checked again like the dashboard's live sockets
  (apps/projects/wsauth.py): on every message from the client and every RECHECK_SECONDS, the same
  decision as at the upgrade (token live, session not ended, user active, still allowed to open
  this notebook). When it no longer holds the socket is closed (4401 credential ended, 4403 no
  longer allowed, 4404 gone) and an audit event `notebook.close` says why.
"""
from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
import weakref
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections
from django.http import HttpRequest
from django.http.request import split_domain_port, validate_host

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core import proxy
from apps.workloads.models import Workload

from .access import SAFE_METHODS, Decision, Upstream, authorize, credentials_from, prefix_of, same_origin

logger = logging.getLogger(__name__)

PREFIX = "/nb/"
ROUTE = re.compile(r"/nb/(?P<project>[^/]+)/(?P<workload>[^/]+)(?P<rest>/.*)?", re.DOTALL)
HEADERS_TIMEOUT = 60.0  # seconds for the IDE's status line and headers
DECISION_TTL = 5.0  # seconds an HTTP access decision is reused (see _decisions)
_AUDIT_EVERY = 60.0
RECHECK_SECONDS = 1.0  # an open websocket's access is checked again at least this often
_CLOSE_CODES = {401: 4401, 403: 4403, 404: 4404}
# A page load while the IDE is still starting: this page, which loads the address again shortly.
STARTING_PAGE = (b"<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=2>"
                 b"<title>Starting your notebook</title></head><body style='font-family:sans-serif;margin:3em'>"
                 b"<h1>Your notebook is starting</h1><p>This page opens it as soon as it answers.</p></body></html>")
_audited: dict[tuple[int, int], float] = {}
_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SESSIONS_PER_LOOP = 16


def _session(upstream: Upstream):
    """One connection pool per event loop and TLS setting (connections are kept per upstream host)."""
    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    key = id(upstream.verify) if not isinstance(upstream.verify, bool) else upstream.verify
    found = per_loop.get(key)
    if found is None or found.closed:
        while len(per_loop) >= _SESSIONS_PER_LOOP:  # TLS contexts made anew (a changed cluster config): oldest go
            loop.create_task(per_loop.pop(next(iter(per_loop))).close())
        found = per_loop[key] = proxy.upstream_session(ssl=upstream.verify, limit=200)
    return found


def _ssl(verify) -> ssl.SSLContext | None:
    """The websocket client's TLS setting for the upstream's `verify` (True, False or an SSLContext)."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return context
    return None


def _host_allowed(scope) -> bool:
    """The Host header names Cairn (ALLOWED_HOSTS), as Django checks it for its own pages."""
    host = dict(scope.get("headers", ())).get(b"host", b"").decode("latin-1")
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS or (["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    return bool(domain) and validate_host(domain, allowed)


def _is_navigation(headers: dict[bytes, bytes], method: str) -> bool:
    """A browser loading a page (not a script fetching data)."""
    mode = headers.get(b"sec-fetch-mode")
    if mode is not None:
        return mode == b"navigate"
    return method == "GET" and b"text/html" in headers.get(b"accept", b"")


def _cookie_names() -> tuple[str, ...]:
    return (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME)


def _audit_due(decision: Decision) -> bool:
    """At most one `notebook.open` a minute per user and notebook (in this process)."""
    key = (decision.user_id, decision.workload_id)
    now = time.monotonic()
    if now - _audited.get(key, -_AUDIT_EVERY) < _AUDIT_EVERY:
        return False
    _audited[key] = now
    if len(_audited) > 10_000:
        _audited.clear()
    return True


def _audit(decision: Decision, scope, headers: dict[bytes, bytes], how: str) -> None:
    request = HttpRequest()
    client = scope.get("client")
    request.META = {"REMOTE_ADDR": client[0] if client else "",
                    "HTTP_USER_AGENT": headers.get(b"user-agent", b"").decode("latin-1"),
                    "HTTP_X_FORWARDED_FOR": headers.get(b"x-forwarded-for", b"").decode("latin-1")}
    workload = Workload.objects.select_related("project", "created_by").get(pk=decision.workload_id)
    actor = get_user_model().objects.get(pk=decision.user_id)
    audit_record(action=AuditAction.NOTEBOOK_OPEN, actor=actor, project=workload.project, target=workload,
                 details={**decision.audit, "via": how}, request=request)


# HTTP decisions that let a request through are kept for DECISION_TTL seconds per credential and
# notebook (the page's many asset and API requests then cost no database work); a revoked token,
# an ended session or a lost membership takes effect within that time. Websocket upgrades and
# refusals are always decided afresh.
_decisions: dict[tuple, tuple[float, Decision]] = {}


def _cached(key: tuple) -> Decision | None:
    found = _decisions.get(key)
    if found is None or time.monotonic() - found[0] > DECISION_TTL:
        return None
    return found[1]


def _keep(key: tuple, decision: Decision) -> None:
    if len(_decisions) > 10_000:
        _decisions.clear()
    _decisions[key] = (time.monotonic(), decision)


async def _decide(scope, *, websocket: bool) -> tuple[Decision, str, str, dict]:
    raw = list(scope.get("headers", ()))
    headers = dict(raw)
    match = ROUTE.fullmatch(scope.get("path", ""))
    project, workload, rest = match["project"], match["workload"], match["rest"]
    creds = credentials_from(headers, proxy.cookies_of(raw))
    method = "GET" if websocket else scope.get("method", "GET")
    navigation = not websocket and _is_navigation(headers, method)
    unsafe_ok = method in SAFE_METHODS or same_origin(creds)
    key = (creds.token, creds.session_key, creds.malformed, unsafe_ok, project, workload)
    decision = None if websocket else _cached(key)
    audit = None

    def decide():
        close_old_connections()
        try:
            found = decision or authorize(project=project, workload_id=workload, method=method, creds=creds,
                                          websocket=websocket)
            if audit:
                _audit(found, scope, headers, audit)
            return found
        finally:
            close_old_connections()

    if decision is None:
        decision = await sync_to_async(decide, thread_sensitive=False)()
        if decision.status == 200 and not websocket:
            _keep(key, decision)
    if decision.status == 200 and (navigation or (websocket and creds.token)) and _audit_due(decision):
        audit = "websocket" if websocket else "page"
        await sync_to_async(decide, thread_sensitive=False)()
    return decision, prefix_of(project, workload), rest, headers


def _target(upstream: Upstream, scope, prefix: str, *, websocket: bool) -> str:
    path = proxy.raw_path(scope)
    if upstream.strip_prefix:
        path = "/" + path[len(prefix):]
    base = upstream.base
    if websocket:
        base = "ws" + base[len("http"):]
    return base + path


async def serve_http(scope, receive, send) -> None:
    match = ROUTE.fullmatch(scope.get("path", ""))
    if match is None:
        await proxy.answer(send, 404, "Not found. Notebooks are served at /nb/<project>/<notebook id>/.")
        return
    if not _host_allowed(scope):
        await proxy.answer(send, 400, "Invalid Host header.")
        return
    if match["rest"] is None:  # /nb/p/7 -> /nb/p/7/ (the IDE's relative links resolve under it)
        location = quote(prefix_of(match["project"], match["workload"]))
        await proxy.answer(send, 308, "The notebook's address ends with a slash.", [(b"location", location.encode())])
        return
    decision, prefix, _, headers = await _decide(scope, websocket=False)
    method = scope.get("method", "GET")
    if decision.status == 401 and _is_navigation(headers, method):
        location = "/signin?next=" + quote(proxy.raw_path(scope), safe="")
        await proxy.answer(send, 302, decision.detail, [(b"location", location.encode())])
        return
    if decision.status != 200:
        extra = [(b"www-authenticate", b'Bearer realm="cairn"')] if decision.status == 401 else []
        await proxy.answer(send, decision.status, decision.detail, extra)
        return
    upstream = decision.upstream
    forwarded = proxy.upstream_headers(scope, keep_cookies_except=_cookie_names(), extra=upstream.headers,
                                       prefix=prefix)
    forwarded = [(n, v) for n, v in forwarded if n != b"origin"]  # Cairn checked it; Jupyter compares it to its own host
    await proxy.proxy_http(
        scope, receive, send, session=_session(upstream), url=_target(upstream, scope, prefix, websocket=False),
        headers=forwarded, timeout=HEADERS_TIMEOUT, what="The notebook",
        response_drop=(b"set-cookie",), starting_page=STARTING_PAGE if _is_navigation(headers, method) else None,
        response_extra=[(b"x-frame-options", b"SAMEORIGIN"), (b"referrer-policy", b"same-origin")],
        zero_copy=True,  # downloads of notebooks' files: socket to socket in the kernel (apps/core/zerocopy.py)
    )


async def serve_websocket(scope, receive, send) -> None:
    match = ROUTE.fullmatch(scope.get("path", ""))
    if match is None or match["rest"] is None or not _host_allowed(scope):
        await proxy.refuse_websocket(receive, send, 1008, "Not found.")
        return
    decision, prefix, _, _ = await _decide(scope, websocket=True)
    if decision.status != 200:
        logger.info("notebook proxy: websocket to %s refused (%s): %s", prefix, decision.status, decision.detail)
        await proxy.refuse_websocket(receive, send, 1008, decision.detail)
        return
    upstream = decision.upstream
    forwarded = proxy.upstream_headers(scope, keep_cookies_except=_cookie_names(), extra=upstream.headers,
                                       prefix=prefix)
    await proxy.proxy_websocket(scope, receive, send, url=_target(upstream, scope, prefix, websocket=True),
                                headers=forwarded, what="The notebook", ssl=_ssl(upstream.verify),
                                guard=_guard(scope, match, decision), recheck_seconds=RECHECK_SECONDS)


def _guard(scope, match, decision: Decision):
    """The open socket's check (proxy_websocket's guard): the upgrade's decision made again with
    the same credentials; when it no longer lets the same user in, (close code, reason), with an
    audit record of the close."""
    raw = list(scope.get("headers", ()))
    headers = dict(raw)
    creds = credentials_from(headers, proxy.cookies_of(raw))

    def check():
        close_old_connections()
        try:
            again = authorize(project=match["project"], workload_id=match["workload"], method="GET", creds=creds,
                              websocket=True)
            if again.status == 200 and again.user_id == decision.user_id:
                return None
            if again.status == 200:  # cannot happen with the same credentials; never let another user's pass
                again = Decision(403, "The socket's user changed.")
            refusal = (_CLOSE_CODES.get(again.status, 1001), again.detail)
            _audit_close(decision, again, scope, headers)
            logger.info("notebook proxy: websocket of user %s to notebook %s closed (%s): %s", decision.user_id,
                        decision.workload_id, again.status, again.detail)
            return refusal
        finally:
            close_old_connections()

    async def guard():
        return await sync_to_async(check, thread_sensitive=False)()

    return guard


def _audit_close(decision: Decision, again: Decision, scope, headers: dict[bytes, bytes]) -> None:
    """`notebook.close`: an open socket of the notebook closed because access ended."""
    request = HttpRequest()
    client = scope.get("client")
    request.META = {"REMOTE_ADDR": client[0] if client else "",
                    "HTTP_USER_AGENT": headers.get(b"user-agent", b"").decode("latin-1")}
    workload = Workload.objects.select_related("project").filter(pk=decision.workload_id).first()
    actor = get_user_model().objects.filter(pk=decision.user_id).first()
    audit_record(action=AuditAction.NOTEBOOK_CLOSE, actor=actor, project=workload.project if workload else None,
                 target=workload, target_type="workloads.workload", target_id=decision.workload_id or "",
                 details={"status": again.status, "reason": again.detail,
                          "path": str(scope.get("path", ""))[:200]}, request=request)


def with_notebook_proxy(http_app, websocket_app):
    """ASGI apps for both protocols with /nb/... taken by the notebook proxy."""

    async def http(scope, receive, send):
        if (scope.get("path", "") + "/").startswith(PREFIX):
            await serve_http(scope, receive, send)
            return
        await http_app(scope, receive, send)

    async def websocket(scope, receive, send):
        if scope.get("path", "").startswith(PREFIX):
            await serve_websocket(scope, receive, send)
            return
        await websocket_app(scope, receive, send)

    return http, websocket
