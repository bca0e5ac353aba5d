"""Zero-copy relaying of a large response body: the kernel moves the bytes from the upstream's
socket to the client's (Linux `splice` through a pipe), so they never enter Python.

Why by hand: relaying a download through Python costs a copy out of one socket and another into
the next, plus the event loop's work per chunk; on the notebook proxy that was 0.57 ms of CPU
per MB, as much as JupyterLab spends serving it, and on a 2-CPU machine it held a proxied
download to about 72% of a direct one. `splice` (what HAProxy does for the same reason) leaves
the kernel's TCP work alone: 0.27 ms per MB in the same benchmark, and no Python per chunk. No library offers it
for an ASGI app: the ASGI server owns the client's socket, and its interface carries bytes only.

So it applies only where both ends are plain sockets this process can reach:
- the client's side is uvicorn's httptools protocol (what `uvicorn[standard]` runs; `send` is its
  response cycle's bound method) without TLS, with a Content-Length it keeps count of;
- the upstream's side is an aiohttp connection without TLS (TCP or a unix socket).
Anything else (TLS either way, h11, another ASGI server, a wrapped `send`, a body of unknown
length) takes the ordinary path, byte for byte the same answer. `available()` says whether this
uvicorn still looks the way this module expects (tests pin it).

The relay runs in a thread of its own (poll + splice; the sockets stay non-blocking and owned by
their transports, which are paused or idle meanwhile): a long download never holds the event loop
or the threads Django's sync views need."""
from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import select
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import aiohttp

# Bodies smaller than this are not worth a thread and a pipe.
MIN_BYTES = 1 << 20
# The pipe between the two sockets. bench/notebook_proxy.py, 25 downloads of 50 MB each way: the
# proxied median was about 1.31 GB/s with 128-512 KiB and 1.21 GB/s with 1 MiB (a bigger pipe
# lets the relay fill it while the client's socket waits, then drain it in bursts).
PIPE_BYTES = 256 * 1024
MAX_RELAYS = 32  # at once; more large downloads than this take the ordinary path
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_POLL_MS = 250  # how often a waiting relay looks at its stop flag

_executor = ThreadPoolExecutor(max_workers=MAX_RELAYS, thread_name_prefix="cairn-splice")
_slots = threading.BoundedSemaphore(MAX_RELAYS)
relayed_bytes = 0  # bytes moved without entering Python since the process started (read by tests)


class _Unsupported(Exception):
    """This kernel or socket type does not splice (nothing was moved yet)."""


class Broken(Exception):
    """The body could not be relayed to its end (the upstream closed early, the client went away):
    the client's connection must be closed, its answer is truncated."""


@cache
def available() -> bool:
    """Whether this platform and this uvicorn allow zero-copy relaying at all (asked once)."""
    if not hasattr(os, "splice"):
        return False
    try:
        from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
    except ImportError:
        return False
    return callable(getattr(RequestResponseCycle, "send", None))


def _cycle_of(send):
    """uvicorn's httptools response cycle behind `send`, when it is one this module can work with."""
    cycle = getattr(send, "__self__", None)
    if cycle is None or type(cycle).__module__ != "uvicorn.protocols.http.httptools_impl":
        return None
    transport = getattr(cycle, "transport", None)
    if transport is None or transport.get_extra_info("sslcontext") is not None:
        return None
    if not hasattr(cycle, "expected_content_length"):
        return None
    return cycle


def _socket_fd(transport) -> int | None:
    if transport is None or transport.is_closing() or transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    return sock.fileno() if sock is not None else None


def eligible(send, response: aiohttp.ClientResponse, method: str) -> bool:
    """Whether this answer's body can be relayed zero-copy (see the module's docstring)."""
    length = response.content_length
    if (length is None or length < MIN_BYTES or method == "HEAD" or response.status in (204, 304)
            or not available() or response.url.scheme == "https"):
        return False
    cycle = _cycle_of(send)
    connection = response.connection
    return (cycle is not None and cycle.chunked_encoding is False and cycle.expected_content_length == length
            and connection is not None and _socket_fd(connection.transport) is not None)


async def relay_body(send, response: aiohttp.ClientResponse) -> None:
    """Send the rest of `response`'s body (eligible() was true, the response's headers are sent)
    to the client: what aiohttp already read, through `send`; the rest, by splice. Raises Broken
    when it could not be sent whole; the upstream connection is then unusable either way (the
    caller closes it), since aiohttp never saw the body's end."""
    global relayed_bytes
    cycle = _cycle_of(send)
    connection = response.connection
    upstream = connection.transport
    # What aiohttp has read already goes first; then it reads no more from this socket (no await
    # between the two, so nothing can arrive in between).
    head = response.content.read_nowait()
    connection.protocol.pause_reading()
    if head:
        await send({"type": "http.response.body", "body": head, "more_body": True})
    remaining = cycle.expected_content_length
    if remaining:
        client = cycle.transport
        # The headers and `head` leave uvicorn's buffer before the kernel writes behind it.
        while client.get_write_buffer_size() and not client.is_closing():
            await asyncio.sleep(0.0005)
        source, sink = _socket_fd(upstream), _socket_fd(client)
        if source is None or sink is None:
            raise Broken("a connection closed before the body")
        if not _slots.acquire(blocking=False):
            await _copy_rest(send, response, remaining)
            return
        stop = threading.Event()
        # The thread works on duplicates of the two descriptors: when a transport closes its socket
        # meanwhile (the client went away, a shutdown), the number may be reused by another
        # connection at once, and the thread must never write into that one.
        source, sink = os.dup(source), os.dup(sink)
        try:
            moved = await asyncio.get_running_loop().run_in_executor(_executor, _splice_and_close, source, sink,
                                                                     remaining, stop)
        except _Unsupported:
            await _copy_rest(send, response, remaining)
            return
        finally:
            stop.set()  # a cancelled relay (server shutdown) ends its thread too
        relayed_bytes += moved
        if moved < remaining:
            raise Broken(f"{moved} of {remaining} bytes")
        # uvicorn counts the body against Content-Length: these bytes went out behind its back.
        cycle.expected_content_length -= moved
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _copy_rest(send, response: aiohttp.ClientResponse, remaining: int) -> None:
    """The ordinary path for the rest of a body whose head was already sent (every relay thread is
    busy, or this socket type does not splice)."""
    response.connection.protocol.resume_reading()
    while remaining:
        chunk = await response.content.readany()
        if not chunk:
            raise Broken(f"the upstream ended {remaining} bytes short")
        remaining -= len(chunk)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _splice_and_close(source: int, sink: int, total: int, stop: threading.Event) -> int:
    try:
        return _splice(source, sink, total, stop)
    finally:
        os.close(source)
        os.close(sink)
        _slots.release()


def _splice(source: int, sink: int, total: int, stop: threading.Event) -> int:
    """Move `total` bytes from socket `source` to socket `sink` (both non-blocking) through a pipe;
    returns how many reached the sink (fewer: the upstream closed early, the client went away,
    or `stop` was set)."""
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        try:
            capacity = fcntl.fcntl(write_end, _F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            capacity = 1 << 16  # the system's limit on pipe sizes: the default still works
        moved = piped = 0
        source_done = False
        while moved < total and not stop.is_set():
            progressed = False
            want = min(capacity - piped, total - moved - piped)
            if not source_done and want > 0:
                try:
                    got = os.splice(source, write_end, want)
                    if got == 0:
                        source_done = True  # the upstream closed
                    piped += got
                    progressed = got > 0
                except BlockingIOError:
                    pass
                except OSError as exc:
                    if not moved and not piped and exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                        raise _Unsupported from exc
                    source_done = True
            if piped:
                try:
                    sent = os.splice(read_end, sink, piped)
                    piped -= sent
                    moved += sent
                    progressed = progressed or sent > 0
                except BlockingIOError:
                    pass
                except OSError as exc:
                    if exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF):
                        return moved  # the client went away
                    raise
            if source_done and not piped:
                return moved
            if not progressed:
                poller = select.poll()
                if not source_done and piped < capacity and piped + moved < total:
                    poller.register(source, select.POLLIN)
                if piped:
                    poller.register(sink, select.POLLOUT)
                poller.poll(_POLL_MS)
        return moved
    finally:
        os.close(read_end)
        os.close(write_end)
