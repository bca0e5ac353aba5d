"""Reverse proxying from ASGI, for any kind that serves an app behind Cairn: HTTP streamed both ways,
and websockets (text and binary frames, subprotocols, close codes).

Kind-independent: the caller decides who may pass and where to (an upstream base URL and the
headers to send, its credential included); this module only moves bytes. The HTTP side uses
aiohttp's client (its HTTP parser is compiled; request bodies stream from the client as they
arrive, responses stream back chunk by chunk: nothing is buffered); the websocket side uses the
`websockets` library.

    await proxy_http(scope, receive, send, session=upstream_session(...), url=..., headers=...)
    await proxy_websocket(scope, receive, send, url=..., headers=...)

Both answer a failure to reach the upstream themselves (502/503/504 as `{"detail": ...}`, or a
refused handshake).

Why aiohttp and not httpx here: per forwarded request httpx with httpcore (pure-Python HTTP/1.1
through h11, anyio streams) cost about 0.47 ms of CPU against 0.17 ms for aiohttp's client, and
relayed downloads in 64 KiB pieces; both were most of what the gateway and the notebook proxy
cost (docs/benchmarks.md, "Serving" and "Notebook proxy").
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import weakref
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from importlib import import_module
from urllib.parse import urlsplit

import aiohttp
from django.conf import settings
from django.contrib.auth import get_user
from multidict import CIMultiDict
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol
from yarl import URL

from apps.core import zerocopy

logger = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({  # `expect`: 100-continue is answered here (uvicorn), never waited for upstream
    b"connection", b"keep-alive", b"expect", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"host",
})
# Never sent on to an upstream: the client's credentials for Cairn, and forwarding headers a
# client could forge (the proxy writes its own).
CREDENTIALS = frozenset({b"authorization", b"cookie", b"x-forwarded-for", b"x-forwarded-host",
                         b"x-forwarded-proto", b"x-forwarded-prefix"})
# Websocket handshake headers the client library writes itself.
_WS_HANDSHAKE = frozenset({b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions",
                           b"sec-websocket-protocol", b"sec-websocket-accept", b"origin"})
_RESPONSE_DROP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"server", b"date",
})
# Headers aiohttp would add to what the client sent (a proxy forwards the client's, or none).
_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# Failures to connect at all: nothing reached the upstream.
REFUSED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)


class _ClientGone(Exception):
    pass


def upstream_session(*, uds: str | None = None, ssl=True, limit: int = 256) -> aiohttp.ClientSession:
    """aiohttp's connection pool set up for proxying (create it on the event loop that uses it):
    no cookie jar (one pool serves every visitor: a cookie an upstream sets must never be sent on
    with someone else's request), no headers of its own, bodies passed on as they come (no
    decompression). `uds`: reach the upstream through this unix socket; `ssl`: True (verify),
    False, or an ssl.SSLContext. (aiohttp's 64 KiB read buffer is kept: relaying a download cost
    no less CPU per MB with 256 KiB or 1 MiB, and most of that cost is the kernel's, copying
    through the two sockets.)"""
    connector = (aiohttp.UnixConnector(path=uds, limit=limit) if uds
                 else aiohttp.TCPConnector(limit=limit, ssl=ssl))
    session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                                    skip_auto_headers=_NO_AUTO_HEADERS, timeout=aiohttp.ClientTimeout(total=None),
                                    trust_env=False)
    _pools.setdefault(asyncio.get_running_loop(), weakref.WeakSet()).add(session)
    return session


_pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its upstream sessions


async def close_pools() -> None:
    """Close the upstream connection pools made on this event loop: a server shutting down calls it
    (pools left open at exit make aiohttp report unclosed connections as the interpreter ends)."""
    for session in list(_pools.pop(asyncio.get_running_loop(), ())):
        await session.close()


_timeouts: dict[float, aiohttp.ClientTimeout] = {}


def _connect_timeout(seconds: float) -> aiohttp.ClientTimeout:
    found = _timeouts.get(seconds)
    if found is None:
        # Connecting (or waiting for a free connection) may take `seconds`; the answer, and the
        # body both ways, as long as the stream needs: the caller bounds the wait for the headers.
        found = _timeouts[seconds] = aiohttp.ClientTimeout(total=None, connect=seconds, sock_connect=seconds)
    return found


async def upstream_request(session: aiohttp.ClientSession, *, method: str, url: str,
                           headers: list[tuple[bytes, bytes]], body, connect_timeout: float) -> aiohttp.ClientResponse:
    """Send one request (`body`: bytes, or an async iterator of bytes streamed as it comes) and
    return the upstream's answer once its status line and headers are in (the body still to read).
    `url` is sent as it is (already percent-encoded, never re-quoted)."""
    return await session.request(
        method, URL(url, encoded=True), data=body if body else None, allow_redirects=False,
        headers=CIMultiDict((n.decode("latin-1"), v.decode("latin-1")) for n, v in headers),
        timeout=_connect_timeout(connect_timeout))


def cause(exc: BaseException) -> BaseException:
    """What an aiohttp error came from: a request body that failed while streaming (the client went
    away, it grew too large) reaches the caller wrapped in a ClientConnectionError."""
    return exc.__cause__ if isinstance(exc, aiohttp.ClientConnectionError) and exc.__cause__ is not None else exc


def response_headers(response: aiohttp.ClientResponse, drop: frozenset[bytes]) -> list[tuple[bytes, bytes]]:
    """The upstream's headers as it sent them (lower-cased names), less those in `drop`."""
    out = []
    for name, value in response.raw_headers:
        name = name.lower()
        if name not in drop:
            out.append((name, value))
    return out


async def relay(receive, send, response: aiohttp.ClientResponse, headers: list[tuple[bytes, bytes]], *,
                first_chunk: bytes | None = None, what: str = "the upstream", method: str = "GET",
                zero_copy: bool = False) -> None:
    """Send the upstream's answer on as it comes, until it ends or the client goes away; then
    give its connection back to the pool (or close it, when the answer was not read to its end).
    `first_chunk`: the part of the body the caller has already read. `zero_copy`: a large body
    of known length may go from socket to socket in the kernel (apps/core/zerocopy.py) where
    both connections allow it."""
    content = response.content
    try:
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        if content.is_eof():
            # The whole answer is here already (the common small one): no tasks, one message.
            rest = content.read_nowait()
            await send({"type": "http.response.body", "body": (first_chunk or b"") + rest, "more_body": False})
            return

        async def pump():
            if zero_copy and not first_chunk and zerocopy.eligible(send, response, method):
                await zerocopy.relay_body(send, response)
                return
            if first_chunk:
                await send({"type": "http.response.body", "body": first_chunk, "more_body": True})
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def watch():
            while True:
                if (await receive())["type"] == "http.disconnect":
                    return

        pumping, watching = asyncio.create_task(pump()), asyncio.create_task(watch())
        done, pending = await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if pumping in done and pumping.exception() is not None:
            # The upstream broke off mid-answer: the client sees a truncated answer, not a whole one.
            logger.info("proxy: %s broke off its answer: %r", what, pumping.exception())
    finally:
        if content.at_eof():
            response.release()
        else:
            response.close()


async def answer(send, status: int, detail: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """A JSON `{"detail": ...}` answer (the API's error shape)."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"), *headers]})
    await send({"type": "http.response.body", "body": body})


def cookies_of(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request's cookies by name (a malformed Cookie header counts as none)."""
    jar = None
    for name, value in headers:
        if name == b"cookie":
            jar = jar if jar is not None else SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # noqa: BLE001
                continue
    return {key: morsel.value for key, morsel in jar.items()} if jar is not None else {}


def upstream_headers(scope, *, keep_cookies_except: Iterable[str] = (), extra: Iterable[tuple[bytes, bytes]] = (),
                     prefix: str = "") -> list[tuple[bytes, bytes]]:
    """The client's request headers fit to send upstream: no hop-by-hop headers, none of the
    client's credentials (Authorization; the cookies named in `keep_cookies_except` are removed,
    the others kept), X-Forwarded-* written by us, then `extra` (the upstream's own credential)."""
    raw = list(scope.get("headers", ()))
    out = [(n, v) for n, v in raw if n not in HOP_BY_HOP and n not in CREDENTIALS]
    if scope["type"] == "websocket":
        out = [(n, v) for n, v in out if n not in _WS_HANDSHAKE]
    extra = list(extra)
    # A cookie in `extra` (an upstream credential) replaces the client's of the same name, in one header.
    own = cookies_of([(n, v) for n, v in extra if n == b"cookie"])
    extra = [(n, v) for n, v in extra if n != b"cookie"]
    dropped = set(keep_cookies_except) | set(own)
    kept = [f"{k}={v}" for k, v in cookies_of(raw).items() if k not in dropped] + [f"{k}={v}" for k, v in own.items()]
    if kept:
        out.append((b"cookie", "; ".join(kept).encode("latin-1")))
    client = scope.get("client")
    host = dict(raw).get(b"host", b"")
    if client:
        out.append((b"x-forwarded-for", str(client[0]).encode()))
    if host:
        out.append((b"x-forwarded-host", host))
    scheme = scope.get("scheme") or ("ws" if scope["type"] == "websocket" else "http")
    out.append((b"x-forwarded-proto", {"ws": b"http", "wss": b"https"}.get(scheme, scheme.encode())))
    if prefix:
        out.append((b"x-forwarded-prefix", prefix.rstrip("/").encode()))
    out.extend(extra)
    return out


def raw_path(scope) -> str:
    """The request's path as the client sent it (still percent-encoded) with its query string."""
    path = (scope.get("raw_path") or scope.get("path", "/").encode()).decode("latin-1")
    query = scope.get("query_string") or b""
    return path + ("?" + query.decode("latin-1") if query else "")


# -- HTTP ----------------------------------------------------------------------------------------

async def proxy_http(scope, receive, send, *, session: aiohttp.ClientSession, url: str,
                     headers: list[tuple[bytes, bytes]], timeout: float = 30.0, connect_timeout: float = 10.0,
                     response_drop: Iterable[bytes] = (), response_extra: Iterable[tuple[bytes, bytes]] = (),
                     what: str = "the upstream", starting_page: bytes | None = None,
                     zero_copy: bool = False) -> int | None:
    """Forward one HTTP request to `url` and stream the answer back. Returns the upstream's status
    (None when it could not be reached). `timeout`: seconds for the status line and headers;
    `connect_timeout`: seconds to connect (the body may then take as long as it needs, both ways).
    `starting_page`: HTML answered (503, Retry-After) instead of JSON when the upstream refuses the
    connection, for a browser loading a page while the app is still starting. `zero_copy`: see
    relay()."""
    first = await receive()
    if first["type"] == "http.disconnect":
        return None
    first_body = first.get("body", b"")
    if first.get("more_body", False):
        async def body():
            yield first_body
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _ClientGone
                yield message.get("body", b"")
                if not message.get("more_body", False):
                    return

        content = body()
    else:
        content = first_body
    try:
        async with asyncio.timeout(timeout):
            response = await upstream_request(session, method=scope.get("method", "GET"), url=url, headers=headers,
                                              body=content, connect_timeout=connect_timeout)
    except (*REFUSED, aiohttp.ServerDisconnectedError) as exc:
        # A replica in a network of its own is reached through a bridge that Cairn's listener
        # hands it (apps/backends/local/bridge.py): the connection is accepted, then closed
        # unanswered while the app inside does not listen yet. For a page load that is the same
        # "still starting" as a refused connection; any other request keeps the 502 below.
        if isinstance(exc, aiohttp.ServerDisconnectedError) and starting_page is None:
            logger.warning("proxy: forwarding to %s failed: %r", what, exc)
            await answer(send, 502, f"Forwarding to {what} failed: {exc.__class__.__name__}.")
            return None
        logger.info("proxy: %s refused the connection: %r", what, exc)
        if starting_page is not None:
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(starting_page)).encode()),
                (b"cache-control", b"no-store"), (b"retry-after", b"2")]})
            await send({"type": "http.response.body", "body": starting_page})
            return None
        await answer(send, 503, f"{what} is not accepting connections (starting up, or stopping).")
        return None
    except TimeoutError:
        await answer(send, 504, f"{what} did not answer within {timeout:g}s.")
        return None
    except _ClientGone:
        return None
    except aiohttp.ClientError as exc:
        if isinstance(cause(exc), _ClientGone):
            return None
        logger.warning("proxy: forwarding to %s failed: %r", what, exc)
        await answer(send, 502, f"Forwarding to {what} failed: {exc.__class__.__name__}.")
        return None
    out = response_headers(response, _RESPONSE_DROP | frozenset(response_drop))
    out += [(b"x-accel-buffering", b"no"), *response_extra]
    await relay(receive, send, response, out, what=what, method=scope.get("method", "GET"), zero_copy=zero_copy)
    return response.status


# -- unix sockets of replicas ------------------------------------------------------------------------

class UnsafeSocket(OSError):
    """A replica's socket path that Cairn refuses to connect to (a link, not a socket, not Cairn's)."""


def open_checked_socket(path: str) -> int:
    """An O_PATH descriptor of the unix socket at `path`, once it is certain to be the one Cairn
    made: the path's folder is a directory (not a link) that Cairn's user owns and nobody else
    may write, and the entry in it is a socket (not a link: never followed) owned by Cairn's user.
    Connect to `socket_alias(fd)` (the kernel resolves it to that very inode, whatever the path
    points to by then, and it is short enough for an AF_UNIX address); close the fd when done.
    FileNotFoundError when there is no socket yet, UnsafeSocket when there is something else."""
    me = os.geteuid()
    folder, name = os.path.split(path)
    if not name or not os.path.isabs(path):
        raise UnsafeSocket(f"{path!r} is not an absolute socket path")
    dir_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != me or info.st_mode & 0o022:
            raise UnsafeSocket(f"{folder} is not Cairn's alone (owner {info.st_uid}, mode {info.st_mode & 0o777:o})")
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != me:
        os.close(fd)
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else (
            "not a socket" if not stat.S_ISSOCK(info.st_mode) else f"owned by uid {info.st_uid}")
        raise UnsafeSocket(f"{path} is {what}, not Cairn's socket")
    return fd


def socket_alias(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


# -- websockets ----------------------------------------------------------------------------------

async def refuse_websocket(receive, send, code: int = 1008, reason: str = "") -> None:
    """Refuse a websocket before its handshake completes: the client sees HTTP 403 and no socket opens."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": code, "reason": reason[:120]})


async def proxy_websocket(scope, receive, send, *, url: str, headers: list[tuple[bytes, bytes]],
                          open_timeout: float = 10.0, what: str = "the upstream", ssl=None,
                          guard: Callable[[], Awaitable[tuple[int, str] | None]] | None = None,
                          recheck_seconds: float = 1.0) -> None:
    """Open a websocket to `url` (ws:// or wss://) with the client's subprotocols, then accept the
    client's with the one the upstream chose, and relay frames both ways (text stays text, bytes
    stay bytes) until either side closes; the close code and reason are passed on.

    `guard`, when given, is asked again before each of the client's messages is passed on and at
    least every `recheck_seconds` while the socket is open: None lets the socket stay, (code,
    reason) closes both sides at once (the client gets that code), so access that ends (a revoked
    token, a removed member) ends the open socket too, not only the next one."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    offered = [Subprotocol(p) for p in scope.get("subprotocols") or []]
    try:
        upstream = await ws_connect(
            url, additional_headers=[(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers],
            subprotocols=offered or None, open_timeout=open_timeout, max_size=None, compression=None,
            user_agent_header=None, proxy=None, ping_interval=None,
            **({"ssl": ssl} if ssl is not None and url.startswith("wss:") else {}),
        )
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        status = exc.response.status_code if isinstance(exc, InvalidStatus) else None
        logger.info("proxy: websocket to %s failed (%s): %r", what, status, exc)
        await send({"type": "websocket.close", "code": 1011, "reason": f"{what} refused the websocket."[:120]})
        return
    await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

    async def client_to_upstream():
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                await upstream.close(code=_passable(message.get("code", 1000)))
                return
            if message["type"] != "websocket.receive":
                continue
            if guard is not None:
                refusal = await _ask(guard)
                if refusal is not None:
                    return refusal  # this message is not passed on
            if message.get("bytes") is not None:
                await upstream.send(message["bytes"])
            elif message.get("text") is not None:
                await upstream.send(message["text"])

    async def upstream_to_client():
        try:
            async for frame in upstream:
                if isinstance(frame, bytes):
                    await send({"type": "websocket.send", "bytes": frame})
                else:
                    await send({"type": "websocket.send", "text": frame})
        except ConnectionClosed:
            pass
        await send({"type": "websocket.close", "code": _passable(upstream.close_code or 1000),
                    "reason": (upstream.close_reason or "")[:120]})

    async def watch():
        while True:
            await asyncio.sleep(recheck_seconds)
            refusal = await _ask(guard)
            if refusal is not None:
                return refusal

    tasks = {asyncio.create_task(client_to_upstream()), asyncio.create_task(upstream_to_client())}
    if guard is not None:
        tasks.add(asyncio.create_task(watch()))
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            if task.exception() is not None and not isinstance(task.exception(), ConnectionClosed):
                logger.info("proxy: websocket relay with %s ended: %r", what, task.exception())
            elif isinstance(task.result(), tuple):  # the guard closed it
                code, reason = task.result()
                await upstream.close(code=1000)
                try:
                    await send({"type": "websocket.close", "code": code, "reason": reason[:120]})
                except Exception as exc:  # noqa: BLE001 - the client may be gone already
                    logger.debug("proxy: closing a refused websocket: %r", exc)
                break
    finally:
        await upstream.close()


async def _ask(guard) -> tuple[int, str] | None:
    """The guard's answer; a guard that fails closes the socket (access could not be checked)."""
    try:
        return await guard()
    except Exception:  # noqa: BLE001
        logger.exception("proxy: checking a websocket's access failed")
        return (1011, "Could not check your access; reconnect.")


def _passable(code: int) -> int:
    """A close code one side may send the other (1005/1006/1015 are reserved for reporting)."""
    return 1000 if code in (1005, 1006, 1015) or not (1000 <= code < 5000) else code


# -- who is calling (the notebook proxy and the serving gateway read the same browser credentials) --


def origin_is_ours(origin: str, host: str) -> bool:
    """The request's `Origin` is Cairn's own (its Host, or one of CSRF_TRUSTED_ORIGINS): a signed-in
    browser's session counts only then for websockets and unsafe methods (no cross-site use)."""
    if not origin or origin == "null":
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    return urlsplit(origin).netloc == host


def session_user(session_key: str):
    """The signed-in user of a dashboard session cookie, or None."""
    if not session_key:
        return None
    engine = import_module(settings.SESSION_ENGINE)

    class _Request:  # what django.contrib.auth.get_user reads: the session (and nothing else)
        session = engine.SessionStore(session_key)

    user = get_user(_Request())
    return user if user.is_authenticated else None
