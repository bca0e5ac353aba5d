"""The ASGI entry of ingestion (apps.tracking.asgi): run-token batches answered ahead of Django
with the view's answers, on tracking's database threads; everything else goes to Django."""
import json

import orjson
import pytest
from channels.db import database_sync_to_async as sync_to_async

from apps.tracking.asgi import with_ingest_fast_path
from apps.tracking.services import run_finish
from tests.factories import make_token
from tests.tracking.factories import run_with_token, stored_points

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


class _Django:
    """Stands for Django behind the entry: records what reached it."""

    def __init__(self):
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"django"})


async def _post(app, path, body: bytes, token: str | None, *, content_type=b"application/json", host=b"127.0.0.1",
                chunk: int = 0):
    headers = [(b"host", host), (b"content-type", content_type)]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "scheme": "http",
             "query_string": b""}
    parts = [body[i:i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]
    sent = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], headers, body


def _path(run):
    return f"/api/v1/projects/{run.project.slug}/runs/{run.pk}/batches/"


def _batch(n=3, start=0, **extra):
    return json.dumps({"points": [{"key": "loss", "step": start + i, "value": i / 2} for i in range(n)],
                       **extra}).encode()


async def test_run_token_batch_is_stored_without_django(project):
    run, token = await sync_to_async(run_with_token)(project=project)
    django = _Django()
    app = with_ingest_fast_path(django)
    status, headers, body = await _post(app, _path(run), _batch(5, batch_id="a1"), token, chunk=40)
    assert (status, orjson.loads(body)) == (200, {"points": 5, "params": 0, "duplicate": False})
    assert headers["x-content-type-options"] == "nosniff" and django.calls == 0
    status, _, body = await _post(app, _path(run), _batch(5, batch_id="a1"), token)
    assert orjson.loads(body)["duplicate"] is True
    assert [s for _, s, _ in await sync_to_async(stored_points)(run)] == [0, 1, 2, 3, 4]


async def test_answers_are_the_views(project):
    run, token = await sync_to_async(run_with_token)(project=project)
    other, _ = await sync_to_async(run_with_token)(project=project)
    path = _path(run)
    app = with_ingest_fast_path(_Django())
    status, headers, body = await _post(app, path, _batch(), token[:-2] + "xx")
    assert status == 401 and headers["www-authenticate"] == "Bearer"
    assert orjson.loads(body) == {"detail": "Invalid run token."}
    assert (await _post(app, _path(other), _batch(), token))[0] == 404
    status, _, body = await _post(app, _path(run), b'{"points": [{"key": "loss", "step": 1, "value": NaN}]}', token)
    assert status == 400 and "JSON parse error" in orjson.loads(body)["detail"]
    status, _, body = await _post(app, _path(run), _batch(start=-5), token)
    assert status == 400 and orjson.loads(body)["detail"].startswith("points[0]: step must be between")
    status, _, body = await _post(app, _path(run), b'{"params": {"blob": "' + b"x" * (5 * 1024 * 1024) + b'"}}', token,
                                  chunk=65536)
    assert status == 413
    await sync_to_async(run_finish)(run=run)
    status, _, body = await _post(app, path, _batch(), token)
    assert status == 409 and "finished" in orjson.loads(body)["detail"]
    assert await sync_to_async(stored_points)(run) == []


async def test_revoked_token_is_refused_even_when_cached(project):
    from apps.tracking.services import run_token_revoke_all

    run, token = await sync_to_async(run_with_token)(project=project)
    app = with_ingest_fast_path(_Django())
    path = _path(run)
    assert (await _post(app, path, _batch(), token))[0] == 200  # the token is cached now
    await sync_to_async(run_token_revoke_all)(run=run)
    status, _, body = await _post(app, path, _batch(start=10), token)
    assert status == 401 and "revoked" in orjson.loads(body)["detail"]
    assert len(await sync_to_async(stored_points)(run)) == 3


async def test_everything_else_goes_to_django(project, alice):
    run, token = await sync_to_async(run_with_token)(project=project)
    api_token = await sync_to_async(make_token)(alice)
    django = _Django()
    app = with_ingest_fast_path(django)
    assert (await _post(app, _path(run), _batch(), api_token))[0] == 299  # API token: the DRF view
    assert (await _post(app, _path(run), _batch(), None))[0] == 299
    assert (await _post(app, _path(run), _batch(), token, content_type=b"text/plain"))[0] == 299
    assert (await _post(app, _path(run), _batch(), token, host=b"evil.example"))[0] == 299  # Django answers 400
    assert (await _post(app, _path(run).replace("batches", "finish"), b"{}", token))[0] == 299
    assert django.calls == 5


@pytest.mark.parametrize("path", ["/api/v1/projects/vision/runs/{pk}\x00/batches/",
                                  "/api/v1/projects/vi\x00sion/runs/{pk}/batches/"])
async def test_a_control_character_in_the_path_is_left_to_django(project, path):
    """Django's middleware answers such paths 404 (apps.core.middleware); the entry does not
    take them, whatever the token (ASGI paths arrive percent-decoded)."""
    run, token = await sync_to_async(run_with_token)(project=project)
    django = _Django()
    status, _, body = await _post(with_ingest_fast_path(django), path.format(pk=run.pk), _batch(), token)
    assert (status, body, django.calls) == (299, b"django", 1)


async def test_a_nul_in_the_token_is_left_to_django(project):
    run, token = await sync_to_async(run_with_token)(project=project)
    django = _Django()
    status, _, body = await _post(with_ingest_fast_path(django), _path(run), _batch(), token[:12] + "\x00" + token[13:])
    assert (status, body, django.calls) == (299, b"django", 1)
