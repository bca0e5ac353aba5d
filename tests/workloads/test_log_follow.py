"""`GET .../logs/?follow=1` streams: the follow is an async generator, so under ASGI each piece
leaves as soon as it is written, it ends with the attempt, and a client that goes away stops it
at once. (The same over HTTP from a real uvicorn, and through the CLI: tests/e2e/test_log_follow.py.)"""
import asyncio
import time

import pytest
from channels.db import database_sync_to_async as sync_to_async

from apps.backends.local.paths import replica_log_path
from apps.workloads.api.logtail import follow_log
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.services import workload_transition
from config.asgi import application
from tests.factories import WorkloadFactory, make_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

S = WorkloadStatus


def _write(workload_id: int, attempt: int, text: str, replica: int = 0) -> None:
    path = replica_log_path(workload_id, attempt, replica)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(text)


async def test_follow_log_carries_on_across_a_restart_and_ends_when_terminal():
    workload = await sync_to_async(WorkloadFactory)(status=S.RUNNING, attempt=1)
    _write(workload.pk, 1, "a1\na2\na3\n")
    received = []

    async def writer():
        await asyncio.sleep(0.2)
        _write(workload.pk, 1, "a4\n")
        await asyncio.sleep(0.2)
        _write(workload.pk, 2, "b1\n")  # a restart: the new attempt's log, then the attempt number
        await sync_to_async(Workload.objects.filter(pk=workload.pk).update)(attempt=2)
        await asyncio.sleep(0.2)
        _write(workload.pk, 2, "b2 ünïcode\n")
        await sync_to_async(workload_transition)(workload_id=workload.pk, to_status=S.SUCCEEDED,
                                                 reason="Succeeded", exit_code=0)

    task = asyncio.create_task(writer())
    async for text in follow_log(workload_id=workload.pk, replica=0, attempt=None, tail=1, poll_seconds=0.05):
        received.append(text)
    await task
    assert "".join(received) == "a3\na4\nb1\nb2 ünïcode\n"

    # a given attempt ends once a later one has started; an unknown workload yields nothing
    first = [t async for t in follow_log(workload_id=workload.pk, replica=0, attempt=1, tail=None)]
    assert "".join(first) == "a1\na2\na3\na4\n"
    assert [t async for t in follow_log(workload_id=workload.pk + 999, replica=0, attempt=None, tail=None)] == []


async def test_follow_of_a_finished_workload_returns_its_log_and_ends():
    workload = await sync_to_async(WorkloadFactory)(status=S.FAILED, attempt=1)
    _write(workload.pk, 1, "only\n")
    assert "".join([t async for t in follow_log(workload_id=workload.pk, replica=0, attempt=None, tail=None)]) == (
        "only\n")
    assert [t async for t in follow_log(workload_id=workload.pk, replica=0, attempt=3, tail=None)] == []


@pytest.mark.parametrize("collection", ["training-jobs", "workloads"])  # the kind's route and the kind-independent one
async def test_over_asgi_lines_leave_as_written_and_a_disconnect_ends_the_follow_at_once(collection, bob, project, pool):
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status=S.RUNNING, attempt=1)
    token = await sync_to_async(make_token)(bob)
    _write(workload.pk, 1, "first line\n")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": f"/api/v1/projects/{project.slug}/{collection}/{workload.pk}/logs/", "raw_path": b"",
        "query_string": b"follow=1", "root_path": "",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }
    sent: list[dict] = []
    got_first, leave = asyncio.Event(), asyncio.Event()
    requested = False

    async def receive():
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
        if b"first line" in message.get("body", b""):
            got_first.set()

    app = asyncio.create_task(application(scope, receive, send))
    # the workload is still running and will not write again: the line must come now
    await asyncio.wait_for(got_first.wait(), timeout=10)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    _write(workload.pk, 1, "second line\n")
    await asyncio.sleep(1)
    assert b"second line" in b"".join(m.get("body", b"") for m in sent)

    left = time.monotonic()
    leave.set()  # the client goes away while the workload still runs
    await asyncio.wait_for(app, timeout=5)
    assert time.monotonic() - left < 3
    assert (await sync_to_async(Workload.objects.get)(pk=workload.pk)).status == S.RUNNING
