"""The sweeps' live topics (`sweeps`, `sweep:<id>`) on a real server: uvicorn as docker-compose
starts it, a real websocket client, changes made through the server's HTTP API and by the sweep
driver in this process (both publish through the same Redis)."""
import asyncio
import json

import pytest
import requests
from channels.db import database_sync_to_async as sync_to_async
from websockets.asyncio.client import connect

from apps.sweeps.driver import sweep_drive
from tests.core.test_websocket_server import server  # noqa: F401  (the fixture: uvicorn on the test database)
from tests.factories import SweepFactory, make_token
from tests.sweeps.test_api import body

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def _server_channel_prefix(settings):
    """Publish where the server listens: its channel layer has the default prefix, not the one
    tests/conftest.py gives this process."""
    default = settings.CHANNEL_LAYERS["default"]
    if default["BACKEND"].startswith("channels_redis."):
        config = {k: v for k, v in default.get("CONFIG", {}).items() if k != "prefix"}
        settings.CHANNEL_LAYERS = {**settings.CHANNEL_LAYERS, "default": {**default, "CONFIG": config}}


async def _frames(ws, until, timeout: float = 20.0) -> list[dict]:
    """Frames received until `until(frames)` holds; fails with what came when it never does."""
    frames: list[dict] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while not until(frames):
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise AssertionError(f"timed out; frames so far: {frames}")
        try:
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=left)))
        except TimeoutError:
            continue
    return frames


def _has(topic: str, kind: str, **fields):
    def check(frames):
        return any(f.get("topic") == topic and f.get("type") == kind and all(f.get(k) == v for k, v in fields.items())
                   for f in frames)
    return check


@pytest.mark.asyncio
async def test_sweep_topics_follow_creation_trials_stop_and_deletion(server, bob, quota,  # noqa: F811
                                                                     _server_channel_prefix):
    token = await sync_to_async(make_token)(bob)
    other = await sync_to_async(SweepFactory)(name="theirs")  # another project's
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token}"
    api = f"{server.url}/api/v1/projects/vision/sweeps/"
    async with connect(f"{server.ws_url}/ws/projects/vision/live/", subprotocols=["cairn.v1", f"cairn.token.{token}"],
                       open_timeout=10) as ws:
        await ws.send(json.dumps({"action": "subscribe", "topic": "sweeps"}))
        await _frames(ws, _has("sweeps", "subscribed"))
        await ws.send(json.dumps({"action": "subscribe", "topic": f"sweep:{other.pk}"}))
        refused = await _frames(ws, lambda fs: any(f.get("type") == "error" for f in fs))
        assert f"Sweep {other.pk} not found in project 'vision'" in refused[-1]["detail"]

        created = await asyncio.to_thread(http.post, api, json=body(max_concurrent=2), timeout=30)
        assert created.status_code == 201, created.text
        sweep_id = created.json()["id"]
        await _frames(ws, _has("sweeps", "sweep.changed", sweep=sweep_id, status="running"))

        topic = f"sweep:{sweep_id}"
        await ws.send(json.dumps({"action": "subscribe", "topic": topic}))
        await _frames(ws, _has(topic, "subscribed"))
        await sync_to_async(sweep_drive)(sweep_id=sweep_id)  # asks two trials and submits their jobs
        frames = await _frames(ws, lambda fs: _has(topic, "sweep.trial", trial=0, status="pending")(fs)
                               and _has(topic, "sweep.trial", trial=1, status="pending")(fs)
                               and _has("sweeps", "sweep.trials", sweep=sweep_id)(fs))
        assert not [f for f in frames if f.get("topic") == "sweeps" and f["type"] == "sweep.trial"], \
            "the list topic says which sweep's trials changed, not each trial"

        stopped = await asyncio.to_thread(http.post, f"{api}{sweep_id}/stop/", timeout=30)
        assert stopped.status_code == 202
        await _frames(ws, lambda fs: _has(topic, "sweep.changed", status="stopping")(fs)
                      and _has("sweeps", "sweep.changed", sweep=sweep_id, status="stopping")(fs))
        await sync_to_async(sweep_drive)(sweep_id=sweep_id)  # its queued trials stop: the sweep ends
        await _frames(ws, lambda fs: _has(topic, "sweep.changed", status="stopped")(fs)
                      and _has(topic, "sweep.trial", trial=0, status="stopped")(fs))

        deleted = await asyncio.to_thread(http.delete, f"{api}{sweep_id}/", timeout=30)
        assert deleted.status_code == 204, deleted.text
        await _frames(ws, lambda fs: _has(topic, "sweep.deleted", sweep=sweep_id)(fs)
                      and _has("sweeps", "sweep.deleted", sweep=sweep_id)(fs))
        # The sweep's subscription ended with it: subscribing again is refused, the list stays.
        await ws.send(json.dumps({"action": "subscribe", "topic": topic}))
        again = await _frames(ws, lambda fs: any(f.get("type") == "error" for f in fs))
        assert f"Sweep {sweep_id} not found" in again[-1]["detail"]
