"""The project events websocket: authenticates like the API, checks membership, and carries
status changes published after commit, through the real Redis channel layer."""
import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.testing.websocket import WebsocketCommunicator

from apps.workloads.services import workload_transition
from config.asgi import application
from tests.factories import WorkloadFactory, make_token
from tests.sockets import refused_with

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(path: str, token: str | None = None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


@pytest.mark.asyncio
async def test_anonymous_is_refused():
    communicator = _communicator("/ws/projects/vision/events/")
    assert await refused_with(communicator) == 4401


@pytest.mark.asyncio
async def test_outsider_is_refused(charlie, project):
    token = await sync_to_async(make_token)(charlie)
    communicator = _communicator("/ws/projects/vision/events/", token)
    assert await refused_with(communicator) == 4404


@pytest.mark.asyncio
async def test_member_receives_status_changes(vera, project, pool):
    token = await sync_to_async(make_token)(vera, scopes=["read"])
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running")
    communicator = _communicator("/ws/projects/vision/events/", token)
    connected, _ = await communicator.connect()
    assert connected
    await sync_to_async(workload_transition)(workload_id=workload.pk, to_status="succeeded", reason="Completed")
    received = [await communicator.receive_json_from(timeout=5) for _ in range(2)]
    kinds = {message["type"]: message for message in received}
    assert kinds["workload.status"] == {"type": "workload.status", "workload": workload.pk, "status": "succeeded",
                                        "reason": "Completed"}
    assert kinds["workload.event"]["reason"] == "Completed"
    await communicator.disconnect()
