"""The dashboard's live websocket ws/projects/<project>/live/ (docs/live.md), over the real Redis
channel layer: authentication, membership, every topic, scoping to the project, coalescing."""
import asyncio
import time

import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.db import transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

import apps.portal.consumers as consumers
import apps.workloads.topics as workload_topics
from apps.backends.local.paths import replica_log_path
from apps.clusters.models import PoolQueue
from apps.clusters.services import node_cordon
from apps.projects.models import Membership
from apps.telemetry.models import TelemetrySample
from apps.telemetry.services import telemetry_record
from apps.tracking.services import run_finish, run_ingest
from apps.tracking.validation import Batch
from apps.workloads.models import Workload
from apps.workloads.services import workload_transition
from config.asgi import application
from tests.factories import MembershipFactory, NodeFactory, ProjectFactory, WorkloadFactory, make_token
from tests.sockets import close_of, refused_with
from tests.tracking.factories import RunFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

PATH = "/ws/projects/vision/live/"


@pytest.fixture(autouse=True)
def _publish_every_batch(settings):
    settings.CAIRN = {**settings.CAIRN, "TELEMETRY_PUBLISH_MIN_INTERVAL": 0}


def _ws(token: str | None = None, *, cookie: str | None = None, path: str = PATH) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def _connected(user, **kwargs) -> WebsocketCommunicator:
    token = await sync_to_async(make_token)(user)
    ws = _ws(token, **kwargs)
    connected, code = await ws.connect()
    assert connected, code
    return ws


async def _subscribe(ws, topic: str) -> None:
    await ws.send_json_to({"action": "subscribe", "topic": topic})
    assert await ws.receive_json_from(timeout=5) == {"topic": topic, "type": "subscribed"}


async def _until(ws, until, timeout: float = 5.0) -> list[dict]:
    """Receive frames until `until(frames)` holds."""
    frames: list[dict] = []
    deadline = time.monotonic() + timeout
    while not until(frames):
        frames.append(await ws.receive_json_from(timeout=max(0.01, deadline - time.monotonic())))
    return frames


def _types(frames) -> list[str]:
    return [f["type"] for f in frames]


def _samples(node, *, workload_id=None, gpus=(0,), metrics=None, at=None):
    at = at or timezone.now()
    metrics = metrics or {"gpu.util_percent": 90.0, "gpu.memory_used_mb": 1000.0}
    return [TelemetrySample(time=at, node=node, gpu=g, metric=m, value=v, workload_id=workload_id)
            for g in gpus for m, v in metrics.items()]


# -- connecting ------------------------------------------------------------------------------------

async def test_anonymous_is_refused_with_4401():
    assert await refused_with(_ws()) == 4401
    assert await refused_with(_ws("cairn_bad_token")) == 4401


async def test_outsider_and_unknown_project_are_refused_with_4404(charlie, alice, project):
    token = await sync_to_async(make_token)(charlie)
    assert await refused_with(_ws(token)) == 4404
    token = await sync_to_async(make_token)(alice)
    assert await refused_with(_ws(token, path="/ws/projects/nope/live/")) == 4404


async def test_token_in_the_query_string_is_refused(vera, project):
    token = await sync_to_async(make_token)(vera, scopes=["read"])
    ws = _ws(path=f"{PATH}?token={token}")
    assert (await ws.connect())[0]
    closed = await close_of(ws)
    assert closed["code"] == 4401 and "cairn.token." in closed["reason"]


async def test_session_cookie_signs_the_socket_in(bob, project, pool):
    def session_cookie():
        client = Client()
        client.force_login(bob)
        return f"sessionid={client.cookies['sessionid'].value}"

    ws = _ws(cookie=await sync_to_async(session_cookie)())
    assert (await ws.connect())[0]
    await _subscribe(ws, "workloads")
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running")
    await sync_to_async(workload_transition)(workload_id=workload.pk, to_status="succeeded", reason="Completed")
    assert await ws.receive_json_from(timeout=5) == {"topic": "workloads", "type": "workload.status",
                                                     "workload": workload.pk, "status": "succeeded",
                                                     "reason": "Completed"}
    await ws.disconnect()


async def test_bad_messages_get_error_frames_and_the_socket_stays_open(alice, project):
    ws = await _connected(alice)
    for message in ["not json", "[1, 2]", '{"action": "dance", "topic": "workloads"}', '{"action": "subscribe"}',
                    '{"action": "subscribe", "topic": 5}', "x" * 5000]:
        await ws.send_to(text_data=message)
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "error" and frame["detail"] and "topic" in frame
    await ws.send_to(bytes_data=b"\x00\x01")
    assert (await ws.receive_json_from(timeout=5))["type"] == "error"
    for topic in ["nope", "workload:abc", "logs:1", "run:", "workloads:1", "logs:1:2:3", "workload:" + "9" * 30]:
        await ws.send_json_to({"action": "subscribe", "topic": topic})
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "error" and frame["topic"] == topic and frame["detail"]
    await _subscribe(ws, "workloads")  # still usable
    await ws.disconnect()


async def test_topic_limit(alice, project, monkeypatch):
    monkeypatch.setattr(consumers, "LIVE_MAX_TOPICS", 2)
    ws = await _connected(alice)
    await _subscribe(ws, "workloads")
    await _subscribe(ws, "runs")
    await _subscribe(ws, "runs")  # again: harmless
    await ws.send_json_to({"action": "subscribe", "topic": "cluster"})
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "error" and "At most 2" in frame["detail"]
    await ws.disconnect()


async def test_membership_is_checked_again_on_every_subscribe(project, alice):
    membership = await sync_to_async(MembershipFactory)(project=project, role="member")
    ws = await _connected(membership.user)
    await _subscribe(ws, "workloads")
    await sync_to_async(Membership.objects.filter(pk=membership.pk).delete)()
    await ws.send_json_to({"action": "subscribe", "topic": "runs"})
    assert await close_of(ws, timeout=0.5) == {"code": 4403, "reason": "You are no longer a member of this project."}


# -- workloads -------------------------------------------------------------------------------------

async def test_workloads_topic_sees_creation_status_changes_and_deletion(bob, project, pool, quota):
    ws = await _connected(bob)
    await _subscribe(ws, "workloads")

    def create():
        client = APIClient()
        client.force_authenticate(bob)
        response = client.post("/api/v1/projects/vision/training-jobs/",
                               {"command": "echo hi", "name": "live-one", "pool": pool.name}, format="json")
        assert response.status_code == 201, response.content
        return response.json()["id"]

    workload_id = await sync_to_async(create)()
    frames = await _until(ws, lambda fs: len(fs) >= 1)
    assert frames == [{"topic": "workloads", "type": "workload.created", "workload": workload_id,
                       "name": "live-one", "kind": "training", "status": "queued"}]
    await sync_to_async(workload_transition)(workload_id=workload_id, to_status="stopped", reason="StopRequested")
    assert await ws.receive_json_from(timeout=5) == {"topic": "workloads", "type": "workload.status",
                                                     "workload": workload_id, "status": "stopped",
                                                     "reason": "StopRequested"}

    def delete():
        client = APIClient()
        client.force_authenticate(bob)
        assert client.delete(f"/api/v1/projects/vision/training-jobs/{workload_id}/").status_code == 204

    await sync_to_async(delete)()
    assert await ws.receive_json_from(timeout=5) == {"topic": "workloads", "type": "workload.deleted",
                                                     "workload": workload_id}
    # Other projects' workloads are not seen.
    other = await sync_to_async(ProjectFactory)(slug="other")
    foreign = await sync_to_async(WorkloadFactory)(project=other, pool=pool, status="running")
    await sync_to_async(workload_transition)(workload_id=foreign.pk, to_status="succeeded", reason="Completed")
    assert await ws.receive_nothing(timeout=0.5)

    await ws.send_json_to({"action": "unsubscribe", "topic": "workloads"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "workloads", "type": "unsubscribed"}
    mine = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running")
    await sync_to_async(workload_transition)(workload_id=mine.pk, to_status="succeeded", reason="Completed")
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


async def test_workload_topic_state_status_events_pending_and_telemetry(vera, project, pool, monkeypatch):
    monkeypatch.setattr(workload_topics, "LIVE_STATE_POLL_SECONDS", 0.2)  # the topic lives in workloads
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="queued",
                                                    pending_reason="Waiting for quota.")
    await sync_to_async(PoolQueue.objects.create)(pool=pool, workloads=[workload.pk + 1, workload.pk + 2, workload.pk])
    other = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running")
    ws = await _connected(vera)
    topic = f"workload:{workload.pk}"
    await _subscribe(ws, topic)
    state = await ws.receive_json_from(timeout=5)
    assert state["topic"] == topic and state["type"] == "workload.state" and state["workload"] == workload.pk
    assert state["status"] == "queued" and state["pending_reason"] == "Waiting for quota."
    assert state["queue_position"] == 3 and state["estimated_start"] is None and state["conditions"] == []
    assert state["waiting_on"] is None  # the scheduler has not decided yet

    # The scheduler writes pending reasons and estimates without an event: the state poll sees them.
    eta = timezone.now() + timezone.timedelta(minutes=30)

    @sync_to_async
    def scheduler_writes():  # a wait and the pool's queue, in one transaction as a cycle writes them
        with transaction.atomic():
            Workload.objects.filter(pk=workload.pk).update(
                pending_reason="Waiting for 1 GPU.", waiting_on="capacity", estimated_start=eta)
            PoolQueue.objects.filter(pool=pool).update(workloads=[workload.pk])

    await scheduler_writes()
    state = await ws.receive_json_from(timeout=5)
    assert state["type"] == "workload.state" and state["pending_reason"] == "Waiting for 1 GPU."
    assert state["waiting_on"] == "capacity"
    assert state["queue_position"] == 1 and state["estimated_start"].startswith(eta.strftime("%Y-%m-%dT%H:%M"))

    await sync_to_async(workload_transition)(workload_id=workload.pk, to_status="admitted", reason="Admitted",
                                             message="Placed on node-a.",
                                             placement=[{"replica": 0, "node": "node-a", "gpus": []}])
    await sync_to_async(workload_transition)(workload_id=other.pk, to_status="succeeded", reason="Completed")
    frames = await _until(ws, lambda fs: "workload.state" in _types(fs) and "workload.status" in _types(fs)
                          and "workload.event" in _types(fs))
    by_type = {f["type"]: f for f in frames}
    assert by_type["workload.status"] == {"topic": topic, "type": "workload.status", "workload": workload.pk,
                                          "status": "admitted", "reason": "Admitted"}
    assert by_type["workload.event"]["reason"] == "Admitted"
    assert by_type["workload.event"]["message"] == "Placed on node-a."
    assert by_type["workload.state"]["status"] == "admitted"
    assert by_type["workload.state"]["placement"] == [{"replica": 0, "node": "node-a", "gpus": []}]
    assert by_type["workload.state"]["estimated_start"] is None
    assert [c["type"] for c in by_type["workload.state"]["conditions"]] == ["Admitted"]
    assert all(f["workload"] == workload.pk for f in frames)  # nothing about the other workload

    # GPU telemetry attributed to it; other workloads' samples are not sent.
    await sync_to_async(telemetry_record)(samples=_samples("node-a", workload_id=other.pk))
    await sync_to_async(telemetry_record)(samples=_samples("node-a", workload_id=workload.pk))
    frame = await ws.receive_json_from(timeout=5)
    while frame["type"] == "workload.state":
        frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "workload.telemetry" and frame["workload"] == workload.pk
    assert {(s["gpu"], s["metric"], s["value"]) for s in frame["samples"]} == {
        (0, "gpu.util_percent", 90.0), (0, "gpu.memory_used_mb", 1000.0)}
    assert set(frame["samples"][0]) == {"node", "gpu", "metric", "value", "time"}
    await ws.disconnect()


async def test_workload_topic_ends_when_the_workload_is_deleted(alice, project, pool):
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="succeeded")
    ws = await _connected(alice)
    topic = f"workload:{workload.pk}"
    await _subscribe(ws, topic)
    assert (await ws.receive_json_from(timeout=5))["type"] == "workload.state"

    def delete():
        client = APIClient()
        client.force_authenticate(alice)
        assert client.delete(f"/api/v1/projects/vision/training-jobs/{workload.pk}/").status_code == 204

    await sync_to_async(delete)()
    assert await ws.receive_json_from(timeout=5) == {"topic": topic, "type": "workload.deleted",
                                                     "workload": workload.pk}
    await ws.send_json_to({"action": "subscribe", "topic": topic})
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "error" and frame["topic"] == topic
    await ws.disconnect()


async def test_objects_of_other_projects_give_an_error_and_no_data(alice, project, pool):
    other = await sync_to_async(ProjectFactory)(slug="other")
    foreign = await sync_to_async(WorkloadFactory)(project=other, pool=pool, status="running", attempt=1)
    foreign_run = await sync_to_async(RunFactory)(project=other)
    ws = await _connected(alice)
    for topic in [f"workload:{foreign.pk}", f"logs:{foreign.pk}:0", f"run:{foreign_run.pk}", "workload:999999",
                  "run:999999", "logs:999999:0"]:
        await ws.send_json_to({"action": "subscribe", "topic": topic})
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "error" and frame["topic"] == topic and "not found" in frame["detail"]
        assert set(frame) == {"topic", "type", "detail"}
    path = replica_log_path(foreign.pk, 1, 0)
    path.parent.mkdir(parents=True)
    path.write_text("secret\n")
    await sync_to_async(workload_transition)(workload_id=foreign.pk, to_status="succeeded", reason="Completed")
    await sync_to_async(telemetry_record)(samples=_samples("node-x", workload_id=foreign.pk))
    await sync_to_async(run_ingest)(run=foreign_run, batch=Batch(batch_id=None, points=[("loss", 0, 1.0, 1.7e9)]))
    assert await ws.receive_nothing(timeout=0.7)
    await ws.disconnect()


# -- logs ------------------------------------------------------------------------------------------

async def test_logs_topic_sends_the_tail_then_follows_and_ends(bob, project, pool):
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running", attempt=1,
                                                    replicas=2)
    path = replica_log_path(workload.pk, 1, 1)
    path.parent.mkdir(parents=True)
    path.write_text("".join(f"line {i}\n" for i in range(600)))
    ws = await _connected(bob)
    topic = f"logs:{workload.pk}:1"

    await ws.send_json_to({"action": "subscribe", "topic": f"logs:{workload.pk}:2"})
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "error" and "Replica 2 does not exist" in frame["detail"]

    await _subscribe(ws, topic)
    frames = await _until(ws, lambda fs: "line 599\n" in "".join(f["text"] for f in fs))
    text = "".join(f["text"] for f in frames)
    assert text.splitlines() == [f"line {i}" for i in range(100, 600)]
    assert all(f["type"] == "logs" and f["topic"] == topic and f["attempt"] == 1 for f in frames)

    # Following: a burst of writes comes in at most 10 frames per second, nothing lost, in order.
    started = time.monotonic()
    for i in range(60):
        with open(path, "a") as f:
            f.write(f"more {i} é\n")
        await asyncio.sleep(0.01)
    frames = await _until(ws, lambda fs: "more 59 é\n" in "".join(f["text"] for f in fs))
    elapsed = time.monotonic() - started
    assert "".join(f["text"] for f in frames) == "".join(f"more {i} é\n" for i in range(60))
    assert len(frames) <= 10 * elapsed + 1

    # A restart: the new attempt's log from its beginning.
    new = replica_log_path(workload.pk, 2, 1)
    new.parent.mkdir(parents=True)
    new.write_text("attempt two\n")
    await sync_to_async(Workload.objects.filter(pk=workload.pk).update)(attempt=2)
    frame = await ws.receive_json_from(timeout=5)
    assert frame == {"topic": topic, "type": "logs", "attempt": 2, "text": "attempt two\n"}

    with open(new, "a") as f:
        f.write("last words\n")
    await sync_to_async(workload_transition)(workload_id=workload.pk, to_status="succeeded", reason="Completed")
    frames = await _until(ws, lambda fs: "logs.end" in _types(fs))
    assert "".join(f.get("text", "") for f in frames) == "last words\n"
    assert frames[-1] == {"topic": topic, "type": "logs.end", "status": "succeeded"}
    # The subscription is over: unsubscribing is harmless, nothing more comes.
    assert await ws.receive_nothing(timeout=0.3)
    await ws.disconnect()


async def test_logs_of_a_workload_that_has_not_started_yet(alice, project, pool):
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="queued", attempt=0)
    ws = await _connected(alice)
    topic = f"logs:{workload.pk}:0"
    await _subscribe(ws, topic)
    assert await ws.receive_nothing(timeout=0.3)
    path = replica_log_path(workload.pk, 1, 0)
    path.parent.mkdir(parents=True)
    path.write_text("hello\n")
    await sync_to_async(Workload.objects.filter(pk=workload.pk).update)(attempt=1, status="running")
    assert await ws.receive_json_from(timeout=5) == {"topic": topic, "type": "logs", "attempt": 1,
                                                     "text": "hello\n"}
    # Unsubscribing stops the follower: later output is not sent.
    await ws.send_json_to({"action": "unsubscribe", "topic": topic})
    assert await ws.receive_json_from(timeout=5) == {"topic": topic, "type": "unsubscribed"}
    with open(path, "a") as f:
        f.write("unseen\n")
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()


# -- tracking --------------------------------------------------------------------------------------

async def test_run_and_runs_topics(bob, project):
    run = await sync_to_async(RunFactory)(project=project)
    other_run = await sync_to_async(RunFactory)(project=project)
    ws = await _connected(bob)
    await _subscribe(ws, f"run:{run.pk}")
    await _subscribe(ws, "runs")

    def ingest(r, points):
        run_ingest(run=r, batch=Batch(batch_id=None, points=points))

    await sync_to_async(ingest)(run, [("loss", 0, 0.5, 1.7e9), ("loss", 1, 0.25, 1.7e9 + 1)])
    await sync_to_async(ingest)(other_run, [("acc", 3, 0.9, 1.7e9)])
    frames = await _until(ws, lambda fs: "run.metrics" in _types(fs) and {
        r for f in fs if f["type"] == "runs.latest" for r in f["runs"]} >= {str(run.pk), str(other_run.pk)})
    metrics = [f for f in frames if f["type"] == "run.metrics"]
    assert metrics == [{"topic": f"run:{run.pk}", "type": "run.metrics", "run": run.pk,
                        "points": {"loss": [[0, 0.5, 1.7e9], [1, 0.25, 1.7e9 + 1]]}}]
    latest = {}
    for frame in frames:
        if frame["type"] == "runs.latest":
            assert frame["topic"] == "runs"
            latest.update(frame["runs"])
    assert latest[str(run.pk)] == {"loss": [1, 0.25, 1.7e9 + 1]} and latest[str(other_run.pk)]["acc"][:2] == [3, 0.9]

    # A status is published to the run's group and to the project's: each topic sends it once.
    await sync_to_async(run_finish)(run=run)
    frames = await _until(ws, lambda fs: len(fs) >= 2)
    assert await ws.receive_nothing(timeout=0.5)
    assert sorted((f["topic"], f["type"], f["run"], f["status"]) for f in frames) == [
        (f"run:{run.pk}", "run.status", run.pk, "finished"), ("runs", "run.status", run.pk, "finished")]
    await ws.disconnect()


async def test_run_points_are_coalesced(alice, project):
    run = await sync_to_async(RunFactory)(project=project)
    ws = await _connected(alice)
    await _subscribe(ws, f"run:{run.pk}")
    started = time.monotonic()
    for step in range(40):
        await sync_to_async(run_ingest)(run=run, batch=Batch(batch_id=None, points=[("loss", step, float(step), 1.7e9)]))
    frames = await _until(ws, lambda fs: sum(len(f["points"]["loss"]) for f in fs) >= 40)
    elapsed = time.monotonic() - started
    assert [p[0] for f in frames for p in f["points"]["loss"]] == list(range(40))
    assert len(frames) <= 10 * elapsed + 1 and len(frames) < 40
    await ws.disconnect()


# -- cluster ---------------------------------------------------------------------------------------

async def test_cluster_topic_sends_node_telemetry_and_node_changes(vera, project, pool):
    node = await sync_to_async(NodeFactory)(pool=pool, name="gpu-a1", gpu_count=2, gpu_memory_mb=81920)
    ws = await _connected(vera)
    await _subscribe(ws, "cluster")
    at = timezone.now()
    await sync_to_async(telemetry_record)(samples=[
        *_samples("gpu-a1", gpus=(0, 1), at=at, metrics={"gpu.util_percent": 50.0, "gpu.memory_used_mb": 100.0,
                                                         "gpu.temperature_c": 60.0, "gpu.power_w": 200.0}),
        TelemetrySample(time=at, node="gpu-a1", metric="node.cpu_percent", value=12.5),
    ])
    await sync_to_async(telemetry_record)(samples=_samples(
        "gpu-b2", at=at, metrics={"gpu.util_percent": 7.0, "gpu.memory_used_mb": 10.0, "gpu.memory_free_mb": 90.0}))
    frames = await _until(ws, lambda fs: {n["node"] for f in fs for n in f["nodes"]} >= {"gpu-a1", "gpu-b2"})
    nodes = {n["node"]: n for f in frames for n in f["nodes"]}
    assert all(f["topic"] == "cluster" and f["type"] == "cluster.telemetry" for f in frames)
    a1 = nodes["gpu-a1"]
    assert a1["cpu_percent"] == 12.5 and a1["time"] == pytest.approx(at.timestamp())
    assert a1["gpus"] == [
        {"gpu": g, "time": pytest.approx(at.timestamp()), "util_percent": 50.0, "memory_used_mb": 100.0,
         "temperature_c": 60.0, "power_w": 200.0, "memory_total_mb": 81920.0} for g in (0, 1)]
    assert nodes["gpu-b2"]["gpus"][0]["memory_total_mb"] == 100.0  # used + free from the exporter

    await sync_to_async(node_cordon)(node=node, reason="GpuXidError", message="GPU 1 reported XID 79.",
                                     health="unhealthy")
    frame = await ws.receive_json_from(timeout=5)
    assert frame == {"topic": "cluster", "type": "node.changed",
                     "node": {"id": node.pk, "name": "gpu-a1", "cluster": node.cluster.name, "pool": pool.name,
                              "health": "unhealthy", "schedulable": False, "cordoned": True},
                     "reason": "GpuXidError", "message": "GPU 1 reported XID 79."}
    await ws.disconnect()


async def test_cluster_frames_are_merged_to_one_per_second(alice, project):
    ws = await _connected(alice)
    await _subscribe(ws, "cluster")
    started = time.monotonic()
    for i in range(30):
        await sync_to_async(telemetry_record)(samples=_samples(f"n{i % 3}", metrics={"gpu.util_percent": float(i)}))
        await asyncio.sleep(0.03)
    frames = await _until(ws, lambda fs: any(g.get("util_percent") == 29.0 for f in fs for n in f.get("nodes", [])
                                             for g in n["gpus"] if n["node"] == "n2"), timeout=8)
    elapsed = time.monotonic() - started
    frames = [f for f in frames if f["type"] == "cluster.telemetry"]  # (node changes of parallel tests)
    assert len(frames) <= elapsed + 1
    await ws.disconnect()


async def test_disconnect_stops_everything(alice, project, pool):
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running", attempt=1)
    path = replica_log_path(workload.pk, 1, 0)
    path.parent.mkdir(parents=True)
    path.write_text("x\n")
    ws = await _connected(alice)
    for topic in ["workloads", f"workload:{workload.pk}", f"logs:{workload.pk}:0", "runs", "cluster"]:
        await ws.send_json_to({"action": "subscribe", "topic": topic})
    frames = await _until(ws, lambda fs: {"workload.state", "logs"} <= set(_types(fs))
                          and _types(fs).count("subscribed") == 5)
    assert "error" not in _types(frames)
    tasks_before = {t for t in asyncio.all_tasks() if not t.done()}
    await ws.disconnect()
    await asyncio.sleep(0.3)
    lingering = [t for t in asyncio.all_tasks() if not t.done() and t in tasks_before
                 and any(name in repr(t.get_coro()) for name in ("_follow_logs", "_follow_state", "_flush_later"))]
    assert lingering == []
