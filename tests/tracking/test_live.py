"""Live tracking websockets over the real Redis channel layer: frames after ingestion, coalescing
to at most 10 frames per second, bounded buffers, authentication and membership on subscribe."""
import asyncio
import time

import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.testing.websocket import WebsocketCommunicator

from apps.projects.models import Membership
from apps.tracking.live import Coalescer
from apps.tracking.services import run_ingest
from apps.tracking.validation import Batch
from config.asgi import application
from tests.factories import MembershipFactory, ProjectFactory, make_token
from tests.sockets import close_of, refused_with
from tests.tracking.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _ws(path: str, token: str | None = None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


def _ingest(run, points):
    run_ingest(run=run, batch=Batch(batch_id=None, points=points))


async def _frames(ws, until, timeout=5.0):
    """Receive frames until `until(frames)` holds."""
    frames = []
    deadline = time.monotonic() + timeout
    while not until(frames):
        frames.append(await ws.receive_json_from(timeout=max(0.01, deadline - time.monotonic())))
    return frames


@pytest.mark.asyncio
async def test_run_subscriber_receives_points_after_commit(vera, project):
    token = await sync_to_async(make_token)(vera, scopes=["read"])
    run = await sync_to_async(RunFactory)(project=project)
    ws = _ws(f"/ws/projects/vision/runs/{run.pk}/live/", token)
    assert (await ws.connect())[0]
    await sync_to_async(_ingest)(run, [("loss", 0, 0.5, 1.7e9), ("loss", 1, 0.25, 1.7e9 + 1), ("acc", 1, 0.9, 1.7e9)])
    frame = await ws.receive_json_from(timeout=5)
    assert frame == {"type": "run.metrics", "run": run.pk,
                     "points": {"loss": [[0, 0.5, 1.7e9], [1, 0.25, 1.7e9 + 1]], "acc": [[1, 0.9, 1.7e9]]}}
    await ws.disconnect()


@pytest.mark.asyncio
async def test_bursts_are_coalesced_to_ten_frames_per_second(alice, project):
    token = await sync_to_async(make_token)(alice)
    run = await sync_to_async(RunFactory)(project=project)
    ws = _ws(f"/ws/projects/vision/runs/{run.pk}/live/", token)
    assert (await ws.connect())[0]
    started = time.monotonic()
    for step in range(60):  # 60 batches as fast as possible
        await sync_to_async(_ingest)(run, [("loss", step, float(step), 1.7e9)])
    frames = await _frames(ws, lambda fs: sum(len(f["points"]["loss"]) for f in fs) >= 60)
    elapsed = time.monotonic() - started
    steps = [p[0] for f in frames for p in f["points"]["loss"]]
    assert steps == list(range(60))  # nothing lost, in order
    assert len(frames) <= 10 * elapsed + 2  # 10 per second, and a saved-up burst of 2 at the start
    assert len(frames) < 60
    await ws.disconnect()


@pytest.mark.asyncio
async def test_project_subscriber_gets_latest_values_and_status(bob, project):
    token = await sync_to_async(make_token)(bob)
    a = await sync_to_async(RunFactory)(project=project)
    b = await sync_to_async(RunFactory)(project=project)
    ws = _ws("/ws/projects/vision/runs/live/", token)
    assert (await ws.connect())[0]
    await sync_to_async(_ingest)(a, [("loss", i, float(i), 1.7e9) for i in range(100)])
    await sync_to_async(_ingest)(b, [("loss", 5, 0.5, 1.7e9)])
    frames = await _frames(ws, lambda fs: {r for f in fs for r in f.get("runs", {})} >= {str(a.pk), str(b.pk)})
    latest = {}
    for frame in frames:
        latest.update(frame["runs"])
    assert latest[str(a.pk)]["loss"][:2] == [99, 99.0] and latest[str(b.pk)]["loss"][:2] == [5, 0.5]
    from apps.tracking.services import run_finish

    await sync_to_async(run_finish)(run=a)
    frame = await ws.receive_json_from(timeout=5)
    assert frame == {"type": "run.status", "run": a.pk, "status": "finished"}
    await ws.disconnect()


@pytest.mark.asyncio
async def test_anonymous_and_outsiders_are_refused(charlie, project):
    run = await sync_to_async(RunFactory)(project=project)
    assert await refused_with(_ws(f"/ws/projects/vision/runs/{run.pk}/live/")) == 4401
    token = await sync_to_async(make_token)(charlie)
    for path in [f"/ws/projects/vision/runs/{run.pk}/live/", "/ws/projects/vision/runs/live/"]:
        assert await refused_with(_ws(path, token)) == 4404


@pytest.mark.asyncio
async def test_member_of_a_cannot_subscribe_to_run_of_b(alice, project):
    other = await sync_to_async(ProjectFactory)(slug="other")
    foreign = await sync_to_async(RunFactory)(project=other)
    token = await sync_to_async(make_token)(alice)
    assert await refused_with(_ws(f"/ws/projects/vision/runs/{foreign.pk}/live/", token)) == 4404
    assert await refused_with(_ws(f"/ws/projects/other/runs/{foreign.pk}/live/", token)) == 4404
    ws = _ws("/ws/projects/vision/runs/live/", token)
    assert (await ws.connect())[0]
    await ws.send_json_to({"action": "subscribe", "run": foreign.pk})
    assert await ws.receive_json_from(timeout=5) == {"type": "error", "run": foreign.pk, "detail": "Run not found."}
    await sync_to_async(_ingest)(foreign, [("loss", 0, 1.0, 1.7e9)])
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


@pytest.mark.asyncio
async def test_membership_is_checked_again_on_subscribe(project, alice):
    dave_membership = await sync_to_async(MembershipFactory)(project=project, role="member")
    token = await sync_to_async(make_token)(dave_membership.user)
    run = await sync_to_async(RunFactory)(project=project)
    ws = _ws("/ws/projects/vision/runs/live/", token)
    assert (await ws.connect())[0]
    await ws.send_json_to({"action": "subscribe", "run": run.pk})
    assert await ws.receive_json_from(timeout=5) == {"type": "subscribed", "run": run.pk}
    await sync_to_async(Membership.objects.filter(pk=dave_membership.pk).delete)()
    await ws.send_json_to({"action": "subscribe", "run": run.pk})
    assert await close_of(ws) == {"code": 4403, "reason": "You are no longer a member of this project."}


@pytest.mark.asyncio
async def test_bad_messages_get_an_error_frame(alice, project):
    token = await sync_to_async(make_token)(alice)
    ws = _ws("/ws/projects/vision/runs/live/", token)
    assert (await ws.connect())[0]
    for message in [{"action": "dance"}, {"action": "subscribe", "run": "1"}, {"action": "subscribe"}]:
        await ws.send_json_to(message)
        assert (await ws.receive_json_from(timeout=5))["type"] == "error"
    await ws.disconnect()


def test_coalescer_is_bounded_and_counts_drops():
    buffer = Coalescer(max_points=1000)
    for batch in range(50):
        buffer.add({"type": "run.metrics", "run": 1,
                    "points": {"loss": [[batch * 100 + i, 0.0, 0.0] for i in range(100)],
                               "acc": [[batch, 1.0, 0.0]]}})
        assert buffer.count <= 1000
    frames = buffer.take(1)
    assert len(frames) == 1
    kept = frames[0]["points"]
    assert sum(len(v) for v in kept.values()) == 1000 and frames[0]["dropped"] == 5050 - 1000
    assert kept["loss"][-1][0] == 4999  # the newest points are kept
    assert not buffer and buffer.take(1) == []


@pytest.mark.asyncio
async def test_slow_client_does_not_grow_server_memory(alice, project, settings):
    """A client that never reads: the consumer's buffer stays at the cap, the rest is dropped."""
    settings.CAIRN = {**settings.CAIRN, "TRACKING_LIVE_BUFFER_POINTS": 500}
    token = await sync_to_async(make_token)(alice)
    run = await sync_to_async(RunFactory)(project=project)
    ws = _ws(f"/ws/projects/vision/runs/{run.pk}/live/", token)
    assert (await ws.connect())[0]
    for batch in range(5):
        await sync_to_async(_ingest)(run, [("loss", batch * 1000 + i, 1.0, 1.7e9) for i in range(1000)])
    await asyncio.sleep(0.5)
    frames = await _frames(ws, lambda fs: any(p[0] == 4999 for f in fs for p in f["points"]["loss"]))
    assert all(len(f["points"]["loss"]) <= 1000 for f in frames)
    assert sum(f.get("dropped", 0) for f in frames) > 0
    await ws.disconnect()


def test_coalescer_merges_gathered_latest_values_of_several_runs():
    buffer = Coalescer(max_points=1000)
    buffer.add({"type": "run.latest", "run": 7, "latest": {"loss": [3, 0.5, 1.0]}})
    buffer.add({"type": "run.latest", "runs": {"7": {"loss": [2, 0.9, 0.5], "acc": [3, 0.1, 1.0]},
                                               "8": {"loss": [1, 0.7, 1.0]}}})
    frame, = buffer.take(None)
    assert frame == {"type": "runs.latest", "runs": {"7": {"loss": [3, 0.5, 1.0], "acc": [3, 0.1, 1.0]},
                                                     "8": {"loss": [1, 0.7, 1.0]}}}
