"""The topic registry of the live socket (apps.core.live): a topic registered by an app is routed
by the hub (apps.portal.consumers) without the hub knowing it; unknown topics keep their error."""
import asyncio

import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.layers import get_channel_layer
from channels.testing.websocket import WebsocketCommunicator

from apps.core.live import Topic, TopicRefused, register_topic, topic_labels, unregister_topic
from config.asgi import application
from tests.factories import make_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

BUILT_IN = ["workloads", "workload:<id>", "logs:<id>:<replica>", "run:<id>", "runs", "cluster", "sweeps",
            "sweep:<id>"]
UNKNOWN = ("Unknown topic. Topics: workloads, workload:<id>, logs:<id>:<replica>, run:<id>, runs, "
           "cluster, sweeps, sweep:<id>.")


class EchoTopic(Topic):
    """A made-up topic: forwards `echo` events of its group at once, merges `tick` events into
    one frame, and its own loop says hello once."""

    def __init__(self, name: str, project_id: int, n: int):
        super().__init__(name)
        self.project_id, self.n = project_id, n
        self.groups = (f"echo.{n}",)
        self.ticks = 0

    def offer(self, event):
        if event["type"] == "echo":
            return [{"type": "echo", "text": event["text"]}]
        self.ticks += 1
        return []

    def pending(self):
        return bool(self.ticks)

    def take(self):
        frame = {"type": "ticks", "count": self.ticks}
        self.ticks = 0
        return [frame]

    async def follow(self, socket):
        await socket.send_frame(self, {"type": "hello", "project": socket.project_id, "slug": socket.slug})


async def _echo(socket, match):
    n = int(match[1])
    if n == 0:
        raise TopicRefused("Echo 0 is not there.")
    return EchoTopic(match.string, socket.project_id, n)


@pytest.fixture
def echo_topic(settings):
    settings.CAIRN_VALIDATE_LIVE_FRAMES = False  # a made-up topic: its frames are declared nowhere
    register_topic("echo:<n>", r"echo:(\d{1,3})", _echo)
    yield
    unregister_topic("echo:<n>")


async def _connected(user) -> WebsocketCommunicator:
    token = await sync_to_async(make_token)(user)
    ws = WebsocketCommunicator(application, "/ws/projects/vision/live/",
                               headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"),
                                        (b"authorization", f"Bearer {token}".encode())])
    connected, code = await ws.connect()
    assert connected, code
    return ws


async def test_the_owning_apps_register_the_built_in_topics_in_ready():
    assert topic_labels() == BUILT_IN


async def test_a_registered_topic_is_routed_by_the_hub(alice, project, echo_topic):
    ws = await _connected(alice)
    await ws.send_json_to({"action": "subscribe", "topic": "echo:7"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:7", "type": "subscribed"}
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:7", "type": "hello",
                                                     "project": project.pk, "slug": "vision"}
    layer = get_channel_layer()
    await layer.group_send("echo.7", {"type": "cairn.event", "event": {"type": "echo", "text": "hi"}})
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:7", "type": "echo", "text": "hi"}
    for _ in range(3):
        await layer.group_send("echo.7", {"type": "cairn.event", "event": {"type": "tick"}})
    frames = []
    while sum(f.get("count", 0) for f in frames) < 3:  # coalesced at the topic's frame rate
        frames.append(await ws.receive_json_from(timeout=5))
    assert all(f == {"topic": "echo:7", "type": "ticks", "count": f["count"]} for f in frames)
    assert sum(f["count"] for f in frames) == 3

    await ws.send_json_to({"action": "subscribe", "topic": "echo:0"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:0", "type": "error",
                                                     "detail": "Echo 0 is not there."}
    await ws.send_json_to({"action": "unsubscribe", "topic": "echo:7"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:7", "type": "unsubscribed"}
    await layer.group_send("echo.7", {"type": "cairn.event", "event": {"type": "echo", "text": "late"}})
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


async def test_unknown_topics_get_the_same_error_frame(alice, project):
    ws = await _connected(alice)
    for topic in ["echo:7", "nope", "workloads:1", "run:"]:
        await ws.send_json_to({"action": "subscribe", "topic": topic})
        assert await ws.receive_json_from(timeout=5) == {"topic": topic, "type": "error", "detail": UNKNOWN}
    await ws.disconnect()


async def test_a_failing_topic_loop_ends_only_that_subscription(alice, project, echo_topic, monkeypatch):
    async def broken(self, socket):
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    monkeypatch.setattr(EchoTopic, "follow", broken)
    ws = await _connected(alice)
    await ws.send_json_to({"action": "subscribe", "topic": "echo:3"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:3", "type": "subscribed"}
    assert await ws.receive_json_from(timeout=5) == {"topic": "echo:3", "type": "error",
                                                     "detail": "This subscription failed; subscribe again."}
    await ws.send_json_to({"action": "subscribe", "topic": "workloads"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "workloads", "type": "subscribed"}
    await ws.disconnect()
