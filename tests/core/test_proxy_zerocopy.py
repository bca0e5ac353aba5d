"""Zero-copy relaying of large bodies (apps/core/zerocopy.py) through a real uvicorn (httptools,
uvloop: what `uvicorn[standard]` and Cairn run) in front of a real upstream on the loopback: a
large download arrives whole and byte for byte, the kernel moved it (not Python), the client's
connection is still usable for its next request, a client that leaves mid-download or an upstream
that breaks off leave nothing behind (no relay thread stuck, no half-answer passed off as whole),
and small bodies, HEAD requests and bodies of unknown length take the ordinary path; where no
relay thread is free or the kernel refuses to splice, a download still arrives whole."""
import asyncio
import errno
import hashlib
import http.client
import os
import socket
import threading
import time

import pytest
import uvicorn
from aiohttp import web

from apps.core import proxy, zerocopy
from tests.core.test_proxy_transport import _upstream

SIZE = 12 * 1024 * 1024 + 12345  # not a multiple of any buffer size
BODY = os.urandom(SIZE)
DIGEST = hashlib.sha256(BODY).hexdigest()


async def _upstream_routes(request):
    if request.path == "/big":
        return web.Response(body=BODY, content_type="application/octet-stream")
    if request.path == "/small":
        return web.Response(body=b"small answer")
    if request.path == "/chunked":
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for n in range(0, SIZE, 1 << 20):
            await response.write(BODY[n:n + (1 << 20)])
        await response.write_eof()
        return response
    if request.path == "/short":
        # Promises the whole body, sends half, and closes the connection.
        response = web.StreamResponse(headers={"Content-Length": str(SIZE)})
        await response.prepare(request)
        await response.write(BODY[:SIZE // 2])
        await asyncio.sleep(0.2)
        request.transport.close()
        return response
    return web.Response(status=404)


@pytest.fixture(scope="module")
def server():
    """uvicorn and the upstream on one event loop in a thread; yields the proxy's port."""
    ready = threading.Event()
    state = {}

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        session = state.get("session")
        if session is None:
            session = state["session"] = proxy.upstream_session()
        await proxy.proxy_http(scope, receive, send, session=session, url=state["upstream"] + scope["path"],
                               headers=[], zero_copy=True)

    async def main():
        runner, state["upstream"] = await _upstream(_upstream_routes)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        state["port"] = sock.getsockname()[1]
        config = uvicorn.Config(app, http="httptools", loop="none", lifespan="off", log_level="warning")
        server = state["server"] = uvicorn.Server(config)
        ready.set()
        await server.serve(sockets=[sock])
        await proxy.close_pools()
        await runner.cleanup()

    def run():
        import uvloop

        uvloop.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    deadline = time.monotonic() + 10
    while not getattr(state["server"], "started", False):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    yield state["port"]
    state["server"].should_exit = True
    thread.join(10)


def _idle_relays() -> bool:
    deadline = time.monotonic() + 5
    while zerocopy._slots._value != zerocopy.MAX_RELAYS:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_this_uvicorn_allows_zero_copy():
    # If an upgrade of uvicorn changes what apps/core/zerocopy.py relies on, this says so first.
    assert zerocopy.available()


def test_a_large_download_arrives_whole_moved_by_the_kernel_and_the_connection_serves_the_next_request(server):
    before = zerocopy.relayed_bytes
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    connection.request("GET", "/big")
    answer = connection.getresponse()
    assert answer.status == 200
    assert int(answer.headers["content-length"]) == SIZE
    got = answer.read()
    assert len(got) == SIZE and hashlib.sha256(got).hexdigest() == DIGEST
    # Most of it never entered Python (what aiohttp had read before the switch went the ordinary way).
    assert zerocopy.relayed_bytes - before > SIZE // 2, zerocopy.relayed_bytes - before
    # Keep-alive: the same connection answers the next request, and the next large one too.
    connection.request("GET", "/small")
    answer = connection.getresponse()
    assert (answer.status, answer.read()) == (200, b"small answer")
    connection.request("GET", "/big")
    got = connection.getresponse().read()
    assert hashlib.sha256(got).hexdigest() == DIGEST
    connection.close()
    assert _idle_relays()


def test_several_large_downloads_at_once_each_arrive_whole(server):
    results = []

    def fetch():
        connection = http.client.HTTPConnection("127.0.0.1", server, timeout=60)
        connection.request("GET", "/big")
        results.append(hashlib.sha256(connection.getresponse().read()).hexdigest())
        connection.close()

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [DIGEST] * 4
    assert _idle_relays()


def test_small_head_and_chunked_answers_take_the_ordinary_path(server):
    before = zerocopy.relayed_bytes
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    connection.request("GET", "/small")
    assert connection.getresponse().read() == b"small answer"
    connection.request("HEAD", "/big")
    answer = connection.getresponse()
    assert answer.status == 200 and int(answer.headers["content-length"]) == SIZE and answer.read() == b""
    connection.request("GET", "/chunked")  # no Content-Length: the proxy cannot count it
    got = connection.getresponse().read()
    assert hashlib.sha256(got).hexdigest() == DIGEST
    connection.close()
    assert zerocopy.relayed_bytes == before


def _download_big(port) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/big")
    answer = connection.getresponse()
    assert answer.status == 200
    digest = hashlib.sha256(answer.read()).hexdigest()
    connection.close()
    return digest


def test_with_every_relay_thread_busy_a_download_takes_the_ordinary_path_whole(server):
    taken = 0
    while zerocopy._slots.acquire(blocking=False):
        taken += 1
    try:
        assert taken == zerocopy.MAX_RELAYS
        before = zerocopy.relayed_bytes
        assert _download_big(server) == DIGEST
        assert zerocopy.relayed_bytes == before
    finally:
        for _ in range(taken):
            zerocopy._slots.release()


def test_where_the_kernel_refuses_to_splice_a_download_takes_the_ordinary_path_whole(server, monkeypatch):
    def refuse(*args):
        raise OSError(errno.EINVAL, "splice refused")

    monkeypatch.setattr(os, "splice", refuse)
    before = zerocopy.relayed_bytes
    assert _download_big(server) == DIGEST
    assert zerocopy.relayed_bytes == before
    assert _idle_relays()


def test_a_client_that_leaves_mid_download_leaves_no_relay_behind(server):
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", server), timeout=10)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        got = 0
        while got < 2 * 1024 * 1024:
            got += len(sock.recv(1 << 16))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
        sock.close()
    assert _idle_relays()
    # The server still answers, whole.
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    connection.request("GET", "/big")
    assert hashlib.sha256(connection.getresponse().read()).hexdigest() == DIGEST
    connection.close()


def test_an_upstream_that_breaks_off_gives_a_truncated_answer_never_a_whole_one(server):
    sock = socket.create_connection(("127.0.0.1", server), timeout=30)
    sock.sendall(b"GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break  # the proxy closed the connection: the client knows the answer is incomplete
        data += chunk
    sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert f"content-length: {SIZE}".encode() in head.lower()
    assert len(body) < SIZE and body == BODY[:len(body)]
    assert _idle_relays()
