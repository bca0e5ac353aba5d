"""A Kubernetes workload's logs through the API the dashboard and the CLI use: `GET .../logs/`
(with tail, replica and follow) and the live websocket topic `logs:<id>:<replica>`, read from the
pod's log on the emulated API server through the backend seam (never from local files)."""
import asyncio
import time

import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.test import AsyncClient

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.services import workload_dispatch
from apps.workloads.models import Workload
from apps.workloads.services import workload_transition
from config.asgi import application
from tests.factories import PoolFactory, WorkloadFactory, make_token

NS = "cairn-vision"
P = "/api/v1/projects/vision/training-jobs"


@pytest.fixture
def k8s_training(project, k8s_cluster, kubelet, emulator):
    """A two-replica training job dispatched to the emulated cluster, its pods started."""
    pool = PoolFactory(cluster=k8s_cluster, name="gpu-pool")
    workload = WorkloadFactory(project=project, pool=pool, status="admitted", replicas=2)
    workload_dispatch(workload_id=workload.pk)
    workload = Workload.objects.get(pk=workload.pk)
    assert workload.status == "running" and workload.attempt == 1
    pods = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-1")
    return workload, pods


@pytest.mark.django_db
def test_rest_logs_of_a_kubernetes_job_come_from_its_pods(k8s_training, emulator, bob, client_for):
    """Emulator only: pod log content needs a kubelet."""
    workload, pods = k8s_training
    emulator.write_log(NS, pods[0], "epoch 1\nepoch 2\nepoch 3\n")
    emulator.write_log(NS, pods[1], '{"rank": 1, "loss": 0.5}\n')  # a log that happens to be JSON
    client = client_for(bob)

    response = client.get(f"{P}/{workload.pk}/logs/?replica=0&tail=2")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == "epoch 2\nepoch 3\n"
    assert client.get(f"{P}/{workload.pk}/logs/").content.decode() == "epoch 1\nepoch 2\nepoch 3\n"
    assert client.get(f"{P}/{workload.pk}/logs/?replica=1").content.decode() == '{"rank": 1, "loss": 0.5}\n'
    assert client.get(f"{P}/{workload.pk}/logs/?tail=1").content.decode() == "epoch 3\n"
    # an explicit attempt
    assert client.get(f"{P}/{workload.pk}/logs/?replica=1&attempt=1").content.decode() == (
        '{"rank": 1, "loss": 0.5}\n')


@pytest.mark.django_db
def test_a_followed_pod_log_sends_each_line_once_and_carries_on_in_a_replacement_pod(k8s_training, emulator,
                                                                                     kubelet):
    """Emulator only: pod log content needs a kubelet."""
    workload, pods = k8s_training
    reader = KubernetesBackend().log_reader(workload, replica=0, attempt=1, tail=None)
    assert reader.read() == ""  # no output yet
    stamp = time.time_ns()
    emulator.write_log(NS, pods[0], "a\nb\n", stamp_ns=stamp)
    assert reader.read() == ""  # asked again within a second: no look at the API
    assert reader.read(final=True) == "a\nb\n"
    emulator.write_log(NS, pods[0], "c\n", stamp_ns=stamp)  # the same nanosecond as a and b
    emulator.write_log(NS, pods[0], "d\n")
    assert reader.read(final=True) == "c\nd\n"
    assert reader.read(final=True) == ""

    # The pod is replaced (deleted, a new one with the same labels and index): found again.
    old = emulator.get("pods", NS, pods[0])
    emulator.delete("pods", NS, pods[0])
    assert reader.read(final=True) == ""
    kubelet.core.create_namespaced_pod(NS, {"metadata": {**{k: old["metadata"][k] for k in ("labels", "annotations")},
                                                         "name": f"{pods[0]}-again"}, "spec": old["spec"]})
    emulator.write_log(NS, f"{pods[0]}-again", "e\n")
    assert reader.read(final=True) == "e\n"

    # A later attempt starts from its beginning; its pods are not there yet.
    assert reader.switch(2) == ""
    assert reader.read(final=True) == ""
    assert reader.attempt == 2


@pytest.mark.django_db
def test_rest_logs_when_the_api_server_keeps_failing_are_a_503_with_a_detail(k8s_training, emulator, bob,
                                                                            client_for):
    """Emulator only: a real server's 5xx cannot be injected on demand."""
    workload, pods = k8s_training
    emulator.write_log(NS, pods[0], "epoch 1\n")
    emulator.fail("GET", "/log", 500, times=10)
    response = client_for(bob).get(f"{P}/{workload.pk}/logs/")
    assert response.status_code == 503, response.content
    assert "Kubernetes" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_rest_follow_streams_a_kubernetes_job_until_it_finishes(k8s_training, emulator, bob):
    """Emulator only: pod log content needs a kubelet."""
    workload, pods = k8s_training
    emulator.write_log(NS, pods[0], "old line\nlast before follow\n")
    token = await sync_to_async(make_token)(bob)
    response = await AsyncClient().get(f"{P}/{workload.pk}/logs/?follow=1&tail=1",
                                       headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, getattr(response, "content", b"")

    async def writer():
        await asyncio.sleep(0.5)
        emulator.write_log(NS, pods[0], "step 1\n")
        await asyncio.sleep(1.2)
        emulator.write_log(NS, pods[0], "step 2\nstep 3\n")
        await sync_to_async(workload_transition)(workload_id=workload.pk, to_status="succeeded", reason="Completed",
                                                 exit_code=0)

    task = asyncio.create_task(writer())
    received = []
    started = time.monotonic()

    async def read_all():
        async for chunk in response.streaming_content:
            received.append(chunk.decode() if isinstance(chunk, bytes) else chunk)

    await asyncio.wait_for(read_all(), timeout=20)
    await task
    assert "".join(received) == "last before follow\nstep 1\nstep 2\nstep 3\n"
    assert time.monotonic() - started < 15


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_live_logs_topic_follows_a_kubernetes_pod(k8s_training, emulator, bob):
    """Emulator only: pod log content needs a kubelet."""
    workload, pods = k8s_training
    emulator.write_log(NS, pods[1], "".join(f"line {i}\n" for i in range(600)))
    token = await sync_to_async(make_token)(bob)
    ws = WebsocketCommunicator(application, "/ws/projects/vision/live/", headers=[
        (b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())])
    connected, code = await ws.connect()
    assert connected, code
    topic = f"logs:{workload.pk}:1"
    await ws.send_json_to({"action": "subscribe", "topic": topic})
    assert await ws.receive_json_from(timeout=5) == {"topic": topic, "type": "subscribed"}

    async def until(text: str, frames: list[dict]) -> str:
        deadline = time.monotonic() + 10
        while text not in "".join(f.get("text", "") for f in frames):
            frames.append(await ws.receive_json_from(timeout=max(0.01, deadline - time.monotonic())))
        return "".join(f.get("text", "") for f in frames)

    frames: list[dict] = []
    received = await until("line 599\n", frames)
    assert received.splitlines() == [f"line {i}" for i in range(100, 600)]  # the last 500 lines
    assert all(f["type"] == "logs" and f["attempt"] == 1 for f in frames)

    # new output arrives once, in order, including lines written within the same second
    for i in range(5):
        emulator.write_log(NS, pods[1], f"more {i}\n")
        await asyncio.sleep(0.3)
    frames = []
    assert await until("more 4\n", frames) == "".join(f"more {i}\n" for i in range(5))

    emulator.write_log(NS, pods[1], "last words\n")
    await sync_to_async(workload_transition)(workload_id=workload.pk, to_status="succeeded", reason="Completed",
                                             exit_code=0)
    frames = []
    deadline = time.monotonic() + 10
    while not frames or frames[-1]["type"] != "logs.end":
        frames.append(await ws.receive_json_from(timeout=max(0.01, deadline - time.monotonic())))
    assert "".join(f.get("text", "") for f in frames) == "last words\n"
    assert frames[-1] == {"topic": topic, "type": "logs.end", "status": "succeeded"}
    await ws.disconnect()
