"""apps.core.proxy.proxy_http sends through httpx's connection pool directly, without an httpx
client: none of a client's per-request layers (its cookie jar reading every answer's Set-Cookie,
redirects, auth) run on the proxy's path, and an answer streams back chunk by chunk as it comes.
Measured in-process before this change, those layers were about a fifth of the proxy's CPU per
small request (docs/benchmarks.md, "Notebook proxy")."""
import asyncio
import http.cookiejar

import httpx
import pytest

from apps.core.proxy import proxy_http


def _refuse(*args, **kwargs):
    raise AssertionError("an httpx client layer ran on the proxy's path")


async def _proxy(transport, *, body=b"", path="/x"):
    sent = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays connected

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST" if body else "GET", "path": path, "headers": []}
    status = await proxy_http(scope, receive, send, transport=transport, url=f"http://upstream{path}",
                              headers=[(b"x-cairn", b"1")], response_drop=(b"set-cookie",))
    return status, sent


def test_the_proxy_uses_no_client_layers_and_streams_the_answer(monkeypatch):
    monkeypatch.setattr(httpx.AsyncClient, "send", _refuse)
    monkeypatch.setattr(http.cookiejar.CookieJar, "extract_cookies", _refuse)
    seen = []

    async def chunks():
        for n in range(3):
            yield bytes([65 + n]) * 10

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.headers.get("x-cairn"), request.headers.get("cookie"), request.read()))
        return httpx.Response(200, headers={"Set-Cookie": "sessionid=evil; Path=/"}, content=chunks())

    async def twice():
        transport = httpx.MockTransport(upstream)
        first = await _proxy(transport, body=b"up")
        second = await _proxy(transport)
        return first, second

    (status, sent), (_, again) = asyncio.run(twice())
    assert status == 200
    assert seen == [("POST", "1", None, b"up"), ("GET", "1", None, b"")]  # no cookie kept for the next caller
    start = sent[0]
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert all(name != b"set-cookie" for name, _ in start["headers"])
    bodies = [m["body"] for m in sent[1:] if m["body"]]
    assert bodies == [b"A" * 10, b"B" * 10, b"C" * 10]  # chunk by chunk, not gathered
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert [m["body"] for m in again[1:] if m["body"]] == bodies


@pytest.mark.parametrize("error, status", [(httpx.ConnectError("refused"), 503), (httpx.ReadError("reset"), 502)])
def test_an_unreachable_upstream_gets_an_answer(error, status):
    def upstream(request):
        raise error

    got, sent = asyncio.run(_proxy(httpx.MockTransport(upstream)))
    assert got is None and sent[0]["status"] == status

