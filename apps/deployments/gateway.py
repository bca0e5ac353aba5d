"""The deployment gateway: `/serve/<project>/<deployment>/<path>` forwarded to a replica.

Answered straight from ASGI, ahead of Django (`with_gateway(app)` in config/asgi.py), so that
request and response bodies stream both ways as they come: nothing is buffered, chunked
responses and server-sent events reach the client chunk by chunk.

- Who may call: access.py (API token or session of a project member, or a deployment key).
  Cairn's credentials (Authorization, Cookie, X-Cairn-Deployment-Key) are never forwarded.
- Where to: a running replica (selectors.deployment_targets): a sandboxed local replica through
  its bridge's unix socket, an unsandboxed one on its 127.0.0.1 port, on Kubernetes the Service.
  The replica with the fewest requests in flight from this server process gets the request.
- A replica that refuses the connection (not listening yet, gone) is skipped: the request goes
  once to another replica when that is safe (an idempotent method whose body has not been
  streamed yet). No replica: 503. No status line and headers within SERVE_TIMEOUT_SECONDS: 504.
- Responses may not set cookies on Cairn's origin (Set-Cookie is dropped) and are served with
  `Content-Security-Policy: sandbox ...`, so a page a deployment serves cannot script Cairn's
  origin (read its cookies, call its API as the visitor).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import weakref
from collections import OrderedDict
from urllib.parse import quote

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host

from apps.core.proxy import (
    REFUSED,
    UnsafeSocket,
    answer,
    cause,
    cookies_of,
    open_checked_socket,
    relay,
    response_headers,
    socket_alias,
    upstream_request,
    upstream_session,
)
from apps.workloads.models import Workload

from .access import SAFE_METHODS, authorize, credentials_from
from .conf import setting
from .decisions import decide_once
from .metrics import metrics, sink
from .selectors import deployment_targets
from .services import deployment_cold_start

logger = logging.getLogger(__name__)

PREFIX = "/serve/"
ROUTE = re.compile(r"/serve/(?P<project>[^/]+)/(?P<name>[^/]+)(?P<rest>/.*)?", re.DOTALL)
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
# Not forwarded to the replica: hop-by-hop headers, and Cairn's credentials. `Expect:
# 100-continue` is between the client and Cairn (uvicorn answers it when the gateway starts reading
# the body): passed on, the replica's client would wait for a 100 the replica may never send.
_REQUEST_DROP = frozenset({
    b"connection", b"keep-alive", b"expect", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"host", b"authorization", b"cookie", b"x-cairn-deployment-key",
    b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto", b"x-forwarded-prefix",
})
_RESPONSE_DROP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"set-cookie", b"content-security-policy", b"server", b"date",
})
_SANDBOX = b"sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals"

_outstanding: dict[str, int] = {}  # requests in flight per replica, in this process


class _ClientGone(Exception):
    pass


# -- connection pools, one per replica socket and one for TCP, per event loop ------------------------

class _SocketClient:
    """aiohttp's connection pool for one replica's unix socket, reached through an O_PATH descriptor
    of it taken once its type and owner were checked (apps.core.proxy.open_checked_socket): every
    connection of the pool goes to that very socket, never through a link a replica planted."""

    def __init__(self, path: str):
        self.fd = open_checked_socket(path)
        self.session = upstream_session(uds=socket_alias(self.fd))

    async def aclose(self) -> None:
        try:
            await self.session.close()
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


class _Clients:
    LIMIT = 256

    def __init__(self):
        # Connection pools without a client's layers: no cookie jar (one pool serves every
        # caller, so a cookie a replica sets must never be sent on with someone else's request),
        # no redirects, no default headers (apps.core.proxy.upstream_session).
        self.tcp = upstream_session()
        self.sockets: OrderedDict[str, _SocketClient] = OrderedDict()

    def for_socket(self, key: str, path: str) -> aiohttp.ClientSession:
        """The connection pool of one replica process (`key`) behind the socket at `path`."""
        found = self.sockets.get(key)
        if found is None:
            found = self.sockets[key] = _SocketClient(path)
            while len(self.sockets) > self.LIMIT:
                _, old = self.sockets.popitem(last=False)
                asyncio.get_running_loop().create_task(old.aclose())
        self.sockets.move_to_end(key)
        return found.session


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Clients] = weakref.WeakKeyDictionary()


def _clients_here() -> _Clients:
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None:
        found = _clients[loop] = _Clients()
    return found


# -- the request ---------------------------------------------------------------------------------

def _host_allowed(host: str) -> bool:
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS or (["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    return bool(domain) and validate_host(domain, allowed)


def _upstream_headers(scope, raw: list[tuple[bytes, bytes]], prefix: str) -> list[tuple[bytes, bytes]]:
    out = [(name, value) for name, value in raw if name not in _REQUEST_DROP]
    client = scope.get("client")
    host = dict(raw).get(b"host", b"")
    if client:
        out.append((b"x-forwarded-for", str(client[0]).encode()))
    if host:
        out.append((b"x-forwarded-host", host))
    out.append((b"x-forwarded-proto", scope.get("scheme", "http").encode()))
    out.append((b"x-forwarded-prefix", prefix.rstrip("/").encode()))
    return out


def _upstream_path(scope, prefix: str, rest: str) -> str:
    raw = scope.get("raw_path") or b""
    encoded_prefix = prefix.rstrip("/").encode()
    if raw.startswith(encoded_prefix + b"/"):
        path = raw[len(encoded_prefix):].decode("latin-1")
    else:
        path = quote(rest, safe="/:@!$&'()*+,;=-._~")
    query = scope.get("query_string") or b""
    return path + ("?" + query.decode("latin-1") if query else "")


def split_canary(targets, canary_revision: int | None, canary_weight: int):
    """During a canary, the group of targets this request goes to: the canary's replicas with
    probability canary_weight %, else the others (all of them when one group has no ready replica)."""
    if canary_revision is None:
        return targets
    canary = [t for t in targets if t.revision == canary_revision]
    stable = [t for t in targets if t.revision != canary_revision]
    if not canary or not stable:
        return targets
    return canary if random.random() * 100 < canary_weight else stable


def _pick(targets, exclude: set[str]):
    candidates = [t for t in targets if t.key not in exclude]
    if not candidates:
        return None
    least = min(_outstanding.get(t.key, 0) for t in candidates)
    return random.choice([t for t in candidates if _outstanding.get(t.key, 0) == least])


async def serve(scope, receive, send) -> None:
    path = scope.get("path", "")
    match = ROUTE.fullmatch(path)
    if match is None:
        await answer(send, 404, "Not found. Deployments are served at /serve/<project>/<deployment>/.")
        return
    raw_headers = list(scope.get("headers", ()))
    headers = dict(raw_headers)
    if not _host_allowed(headers.get(b"host", b"").decode("latin-1")):
        await answer(send, 400, "Invalid Host header.")
        return
    project, name, rest = match["project"], match["name"], match["rest"]
    prefix = f"{PREFIX}{project}/{name}/"
    if rest is None:  # /serve/p/d -> /serve/p/d/ (relative links in the app resolve under it)
        query = scope.get("query_string") or b""
        location = quote(prefix) + ("?" + query.decode("latin-1") if query else "")
        await answer(send, 308, "The deployment's root ends with a slash.", [(b"location", location.encode())])
        return

    creds = credentials_from(headers, cookies_of(raw_headers))
    method = scope.get("method", "GET")
    cache_key = (creds.key, creds.token, creds.session_key, creds.malformed, creds.origin, creds.host, project,
                 name, method in SAFE_METHODS)

    def decide():
        close_old_connections()
        try:
            return authorize(project=project, name=name, method=method, creds=creds)
        finally:
            close_old_connections()

    decision = await decide_once(cache_key, sync_to_async(decide, thread_sensitive=False))
    if decision.status != 200:
        extra = [(b"www-authenticate", b'Bearer realm="cairn"')] if decision.status == 401 else []
        await answer(send, decision.status, decision.detail, extra)
        return
    _ensure_flusher()
    token = metrics.start(workload_id=decision.workload_id, project=project, name=name, replica=None)
    answered = {"status": 499}  # the client went away before any answer

    async def counted_send(message):
        if message["type"] == "http.response.start":
            answered["status"] = message["status"]
        await send(message)

    try:
        await _serve_authorized(scope, receive, counted_send, decision, token=token, project=project, name=name,
                                rest=rest, prefix=prefix, method=method, headers=headers, raw_headers=raw_headers)
    finally:
        metrics.finish(token, answered["status"])


async def _serve_authorized(scope, receive, send, decision, *, token, project, name, rest, prefix, method, headers,
                            raw_headers) -> None:
    targets = decision.targets
    if not targets and decision.workload_status == "running" and decision.scales_to_zero:
        targets = await _hold_for_cold_start(send, decision.workload_id, name)
        if targets is None:
            return
    if not targets:
        if decision.workload_status == "running":
            await answer(send, 503, f"Deployment '{name}' has no ready replica: none has answered its "
                                     "readiness check yet (starting up), or all have failed it.",
                          [(b"retry-after", b"1")])
        else:
            await answer(send, 503, f"Deployment '{name}' has no running replica to answer "
                                     f"(it is {decision.workload_status or 'not running'}).")
        return
    limit = int(setting("SERVE_MAX_BODY_BYTES"))
    length = headers.get(b"content-length", b"")
    if length:
        try:
            too_large = int(length) > limit
        except ValueError:
            await answer(send, 400, "Content-Length is not a number.")
            return
        if too_large:
            await answer(send, 413, f"The request body is larger than the {limit} bytes a deployment accepts.")
            return
    group = split_canary(targets, decision.canary_revision, decision.canary_weight)
    # A replica of the chosen group that refuses the connection (being replaced) is retried on
    # the other group rather than failing the request.
    await _forward(scope, receive, send, group, fallback=targets, name=name, prefix=prefix, method=method,
                   headers=_upstream_headers(scope, raw_headers, prefix),
                   path=_upstream_path(scope, prefix, rest), token=token)


_held = 0  # requests of this process waiting for a cold start


def _cold_start(workload_id: int) -> None:
    close_old_connections()
    try:
        deployment_cold_start(workload_id=workload_id)
    finally:
        close_old_connections()


def _ready_targets(workload_id: int):
    close_old_connections()
    try:
        workload = Workload.objects.filter(pk=workload_id).first()
        return deployment_targets(workload) if workload is not None else []
    finally:
        close_old_connections()


async def _hold_for_cold_start(send, workload_id: int, name: str):
    """A deployment scaled to zero: ask for a replica and hold the request until one is ready, at
    most SERVE_COLD_START_SECONDS; at most SERVE_HOLD_QUEUE requests wait per process (then 503).
    Returns the targets, [] when none came in time, None when it already answered."""
    global _held
    if _held >= int(setting("SERVE_HOLD_QUEUE")):
        await answer(send, 503, f"Deployment '{name}' is starting from zero replicas and too many requests "
                                 "already wait for it; try again shortly.", [(b"retry-after", b"2")])
        return None
    _held += 1
    try:
        await sync_to_async(_cold_start, thread_sensitive=False)(workload_id)
        deadline = asyncio.get_running_loop().time() + float(setting("SERVE_COLD_START_SECONDS"))
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
            targets = await sync_to_async(_ready_targets, thread_sensitive=False)(workload_id)
            if targets:
                return targets
        await answer(send, 503, f"Deployment '{name}' did not start a ready replica within "
                                 f"{float(setting('SERVE_COLD_START_SECONDS')):g}s of a cold start.",
                      [(b"retry-after", b"2")])
        return None
    finally:
        _held -= 1


class _TooLarge(Exception):
    pass


async def _forward(scope, receive, send, targets, *, fallback=(), name, prefix, method, headers, path,
                   token) -> None:
    limit = int(setting("SERVE_MAX_BODY_BYTES"))
    first = await receive()
    if first["type"] == "http.disconnect":
        return
    first_body = first.get("body", b"")
    if len(first_body) > limit:
        await answer(send, 413, f"The request body is larger than the {limit} bytes a deployment accepts.")
        return
    streamed = {"started": False, "size": len(first_body), "ended": not first.get("more_body", False)}
    receiving = asyncio.Event()  # set while the body's generator waits for the client
    if first.get("more_body", False):
        async def body():
            streamed["started"] = True
            yield first_body
            while True:
                receiving.set()
                try:
                    message = await receive()
                finally:
                    receiving.clear()
                if message["type"] == "http.disconnect":
                    raise _ClientGone
                chunk = message.get("body", b"")
                streamed["size"] += len(chunk)
                streamed["ended"] = not message.get("more_body", False)
                if streamed["size"] > limit:
                    raise _TooLarge
                yield chunk
                if streamed["ended"]:
                    return

        content = body()
    else:
        content = first_body  # the whole body is here: it can be sent again to another replica

    clients = _clients_here()
    tried: set[str] = set()
    timeout = float(setting("SERVE_TIMEOUT_SECONDS"))
    connect_timeout = float(setting("SERVE_CONNECT_TIMEOUT_SECONDS"))
    tries = max(1, int(setting("SERVE_MAX_TRIES")))
    unsafe = False  # a replica's socket was not the one Cairn made
    while True:
        target = _pick(targets, tried) or _pick(fallback, tried)
        if target is None:
            if unsafe:
                await answer(send, 502, f"A replica of deployment '{name}' cannot be reached: its socket is not "
                                         "the one Cairn made.")
                return
            await answer(send, 503, f"No replica of deployment '{name}' accepted the connection "
                                     "(starting up, or stopping).")
            return
        tried.add(target.key)
        metrics.assign(token, target.replica)
        if target.socket:
            try:
                session = clients.for_socket(f"{target.key}|{target.socket}", target.socket)
            except UnsafeSocket as exc:
                # Not the socket Cairn made (a replica planted a link, say): never connected to.
                logger.warning("gateway: replica %s of %s refused: %s", target.key, prefix, exc)
                unsafe = True
                if len(tried) < tries:
                    continue
                await answer(send, 502, f"A replica of deployment '{name}' cannot be reached: its socket is not "
                                         "the one Cairn made.")
                return
            except OSError as exc:  # gone (stopping) or not there: like a refused connection
                logger.info("gateway: replica %s of %s has no socket: %r", target.key, prefix, exc)
                if len(tried) < tries:
                    continue
                await answer(send, 503, f"No replica of deployment '{name}' accepted the connection "
                                         "(starting up, or stopping).")
                return
            url = f"http://replica{path}"
        else:
            session, url = clients.tcp, f"{target.url}{path}"
        _outstanding[target.key] = _outstanding.get(target.key, 0) + 1
        try:
            try:
                # Reads and writes may pause as long as the stream needs; the headers' deadline is
                # SERVE_TIMEOUT_SECONDS.
                async with asyncio.timeout(timeout):
                    response = await upstream_request(session, method=method, url=url, headers=headers, body=content,
                                                      connect_timeout=connect_timeout)
                    first_chunk = await _first_chunk(response, retryable=method in IDEMPOTENT
                                                     and not streamed["started"])
            except REFUSED as exc:
                # Nothing reached the replica: another one may take the request, if the body is still here.
                logger.info("gateway: replica %s of %s refused the connection: %r", target.key, prefix, exc)
                if len(tried) < tries and not streamed["started"]:
                    continue
                await answer(send, 503, f"No replica of deployment '{name}' accepted the connection "
                                         "(starting up, or stopping).")
                return
            except TimeoutError:
                await answer(send, 504, f"Deployment '{name}' did not answer within {timeout:g}s.")
                return
            except (_ClientGone, _TooLarge, aiohttp.ClientError) as exc:
                why = cause(exc)
                if isinstance(why, _ClientGone):
                    return
                if isinstance(why, _TooLarge):
                    await answer(send, 413, f"The request body is larger than the {limit} bytes a deployment "
                                             "accepts.")
                    return
                if streamed["started"] and not streamed["ended"]:
                    # The replica gave up while the body still streamed in: the rest of it decides
                    # between a body too large (413) and a failed replica (502).
                    why = await _rest_of_body(receive, streamed, receiving, limit)
                    if why is _ClientGone:
                        return
                    if why is _TooLarge:
                        await answer(send, 413, f"The request body is larger than the {limit} bytes a deployment "
                                                 "accepts.")
                        return
                # No answer at all (reset, closed before the status line, not HTTP): sent again to
                # another replica when that cannot do harm: the method is idempotent and the body
                # is still here to send.
                logger.info("gateway: replica %s of %s failed before answering: %r", target.key, prefix, exc)
                if len(tried) < tries and not streamed["started"] and method in IDEMPOTENT:
                    continue
                await answer(send, 502, f"A replica of deployment '{name}' closed the connection without "
                                         "answering: it may not listen on $PORT yet, or it failed.")
                return
            metrics.replied(token)  # whatever its status, this answer is the replica's
            out = response_headers(response, _RESPONSE_DROP)
            out += [(b"content-security-policy", _SANDBOX), (b"x-accel-buffering", b"no")]
            await relay(receive, send, response, out, first_chunk=first_chunk, what=f"a replica of {prefix}")
            return
        finally:
            _outstanding[target.key] -= 1
            if not _outstanding[target.key]:
                del _outstanding[target.key]


async def _rest_of_body(receive, streamed: dict, receiving: asyncio.Event, limit: int):
    """Read (and drop) what is left of a streamed request body once forwarding it failed: _TooLarge
    when it grows past `limit`, _ClientGone when the client leaves, None when it ends in time."""
    for _ in range(100):  # aiohttp cancels the body's writer when the request fails: let it stop
        if not receiving.is_set():
            break
        await asyncio.sleep(0.01)
    else:
        return None
    while streamed["size"] <= limit:
        message = await receive()
        if message["type"] == "http.disconnect":
            return _ClientGone
        streamed["size"] += len(message.get("body", b""))
        if not message.get("more_body", False):
            return _TooLarge if streamed["size"] > limit else None
    return _TooLarge


async def _first_chunk(response: aiohttp.ClientResponse, *, retryable: bool) -> bytes | None:
    """For an answer of known length to a request that may be sent again, read its first chunk
    before answering the client: a replica that dies between its headers and its body then costs
    a retry elsewhere, not a broken answer. Streams (no Content-Length) start at once."""
    if not retryable or "content-length" not in response.headers:
        return None
    try:
        return await response.content.readany()
    except BaseException:
        response.close()
        raise


# -- the metrics flusher: one task per process, on the loop that serves requests --------------------

_flusher: asyncio.Task | None = None


def _ensure_flusher() -> None:
    global _flusher
    if _flusher is None or _flusher.done() or _flusher.get_loop().is_closed():
        _flusher = asyncio.get_running_loop().create_task(_flush_forever())


async def _flush_forever() -> None:
    interval = float(setting("SERVE_METRICS_INTERVAL_SECONDS"))
    while True:
        await asyncio.sleep(interval)
        samples = metrics.flush()
        store = sink()
        if samples and store is not None:
            try:
                await sync_to_async(_store, thread_sensitive=False)(store, samples)
            except Exception:  # noqa: BLE001 - metrics are best effort; serving goes on
                logger.exception("gateway: could not store request metrics")


def _store(store, samples) -> None:
    close_old_connections()
    try:
        store(samples)
    finally:
        close_old_connections()


def with_gateway(app):
    """Wrap the HTTP ASGI application `app`: /serve/... goes to the gateway, the rest to `app`."""

    async def application(scope, receive, send):
        if scope["type"] == "http" and (scope.get("path", "") + "/").startswith(PREFIX):
            await serve(scope, receive, send)
            return
        await app(scope, receive, send)

    return application
