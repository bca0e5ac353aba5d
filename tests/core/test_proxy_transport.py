"""apps.core.proxy.proxy_http against a real upstream on the loopback: it sends through aiohttp's
connection pool set up for proxying (apps.core.proxy.upstream_session): no cookie jar keeps an
upstream's cookies for the next visitor, no headers of its own are added, an answer streams back
chunk by chunk as it comes, a small answer goes back in one message, and an upstream that cannot
be reached gets a clear answer."""
import asyncio
import socket

import pytest
from aiohttp import web

from apps.core.proxy import proxy_http, upstream_session


async def _proxy(session, url, *, body=b"", method=None):
    sent = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays connected

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method or ("POST" if body else "GET"), "path": "/x", "headers": []}
    status = await proxy_http(scope, receive, send, session=session, url=url,
                              headers=[(b"x-cairn", b"1")], response_drop=(b"set-cookie",))
    return status, sent


async def _upstream(handler):
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}"


def test_the_proxy_keeps_no_cookies_adds_no_headers_and_streams_the_answer():
    seen = []

    async def handler(request):
        seen.append((request.method, dict(request.headers), await request.read()))
        if request.path == "/small":
            return web.Response(body=b"small", headers={"Set-Cookie": "sessionid=evil; Path=/"})
        response = web.StreamResponse(headers={"Set-Cookie": "sessionid=evil; Path=/"})
        await response.prepare(request)
        for n in range(3):
            await response.write(bytes([65 + n]) * 10)
            await asyncio.sleep(0.1)
        await response.write_eof()
        return response

    async def run():
        runner, base = await _upstream(handler)
        session = upstream_session()
        try:
            first = await _proxy(session, f"{base}/stream", body=b"up")
            second = await _proxy(session, f"{base}/stream")
            small = await _proxy(session, f"{base}/small")
        finally:
            await session.close()
            await runner.cleanup()
        return first, second, small

    (status, sent), (_, again), (small_status, small) = asyncio.run(run())
    assert status == 200
    assert [(method, body) for method, _, body in seen] == [("POST", b"up"), ("GET", b""), ("GET", b"")]
    for _, headers, _ in seen:
        assert headers["x-cairn"] == "1"
        assert "Cookie" not in headers  # no cookie kept for the next caller
        assert not {"User-Agent", "Accept", "Accept-Encoding"} & set(headers)  # none of its own
    start = sent[0]
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert all(name != b"set-cookie" for name, _ in start["headers"])
    bodies = [m["body"] for m in sent[1:] if m["body"]]
    assert bodies == [b"A" * 10, b"B" * 10, b"C" * 10]  # chunk by chunk, not gathered
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert [m["body"] for m in again[1:] if m["body"]] == bodies
    assert small_status == 200 and small[1:] == [{"type": "http.response.body", "body": b"small", "more_body": False}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("upstream, status", [("refuses", 503), ("hangs up", 502)])
def test_an_unreachable_upstream_gets_an_answer(upstream, status):
    async def run():
        server = None
        if upstream == "refuses":
            url = f"http://127.0.0.1:{_free_port()}/x"
        else:
            async def hang_up(reader, writer):
                await reader.readuntil(b"\r\n\r\n")
                writer.close()

            server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        session = upstream_session()
        try:
            return await _proxy(session, url)
        finally:
            await session.close()
            if server is not None:
                server.close()

    got, sent = asyncio.run(run())
    assert got is None and sent[0]["status"] == status
    assert b"detail" in sent[1]["body"]
