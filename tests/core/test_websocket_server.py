"""Websockets against a real server: uvicorn started as docker-compose starts it (access log on,
log level info), a real websocket client. What a client sees (close codes after the handshake, the
`cairn.v1` subprotocol), what the server writes to its log (never a token), and a client that goes
away mid-stream (no error logged)."""
import asyncio
import sys
import threading
import time

import pytest
import requests
from channels.db import database_sync_to_async as sync_to_async
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from apps.backends.local.paths import replica_log_path
from tests.factories import WorkloadFactory, make_token
from tests.processes import Process, cairn_env, free_port, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = "http://127.0.0.1"


class Server:
    def __init__(self, log):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        self.process = Process([sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                                "--port", str(self.port), "--log-level", "info"], cairn_env(), log)
        wait_for(self._up, timeout=60, message="the server to answer")

    def _up(self) -> bool:
        if self.process.popen.poll() is not None:
            raise AssertionError(f"the server exited:\n{self.process.output()}")
        try:
            return requests.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def output(self) -> str:
        return self.process.output()


@pytest.fixture
def server(tmp_path):
    srv = Server(tmp_path / "server.log")
    yield srv
    srv.process.stop()


async def _close_code(url: str, **kwargs) -> tuple[int, str]:
    """Open a socket the server accepts and then closes; the close code and reason."""
    async with connect(url, open_timeout=10, **kwargs) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), timeout=10)
    return closed.value.rcvd.code, closed.value.rcvd.reason


def _token_protocols(token: str) -> list[str]:
    return ["cairn.v1", f"cairn.token.{token}"]


@pytest.mark.asyncio
async def test_a_browser_like_client_sees_the_close_codes_and_the_subprotocol(server, alice, charlie, project):
    live = f"{server.ws_url}/ws/projects/vision/live/"
    code, reason = await _close_code(live, origin=ORIGIN)
    assert code == 4401 and "cairn.token.<token>" in reason
    outsider = await sync_to_async(make_token)(charlie)
    assert (await _close_code(live, subprotocols=_token_protocols(outsider)))[0] == 4404
    member = await sync_to_async(make_token)(alice)
    assert (await _close_code(f"{server.ws_url}/ws/projects/nope/live/", subprotocols=_token_protocols(member)))[0] == 4404

    async with connect(live, subprotocols=_token_protocols(member), open_timeout=10) as ws:  # no Origin: not a browser
        assert ws.subprotocol == "cairn.v1"
        assert member not in str(ws.response.headers)
        await ws.send('{"action": "subscribe", "topic": "workloads"}')
        assert await asyncio.wait_for(ws.recv(), timeout=10) == '{"topic": "workloads", "type": "subscribed"}'


@pytest.mark.asyncio
async def test_a_token_in_the_url_is_refused_and_never_logged(server, alice, project):
    token = await sync_to_async(make_token)(alice)
    code, reason = await _close_code(f"{server.ws_url}/ws/projects/vision/live/?token={token}", origin=ORIGIN)
    assert code == 4401 and "URL" in reason
    # HTTP requests with a token in the query string are logged by the access log too.
    await asyncio.to_thread(requests.get, f"{server.url}/api/v1/me/?token={token}", timeout=10)
    secret = token.rsplit("_", 1)[1]
    await asyncio.to_thread(wait_for, lambda: "/api/v1/me/" in server.output(), 10, 0.1, "the access log line")
    output = server.output()
    assert '"WebSocket /ws/projects/vision/live/?token=[redacted]"' in output  # the line is there...
    assert secret not in output and token not in output  # ...without the token


@pytest.mark.asyncio
async def test_revoking_a_token_closes_the_open_socket_on_a_real_server(server, bob, project):
    token = await sync_to_async(make_token)(bob)
    async with connect(f"{server.ws_url}/ws/projects/vision/live/", subprotocols=_token_protocols(token),
                       open_timeout=10) as ws:
        await ws.send('{"action": "subscribe", "topic": "workloads"}')
        await asyncio.wait_for(ws.recv(), timeout=10)
        tokens = (await asyncio.to_thread(requests.get, f"{server.url}/api/v1/tokens/", timeout=10,
                                          headers={"Authorization": f"Bearer {token}"})).json()["results"]
        revoked = await asyncio.to_thread(requests.delete, f"{server.url}/api/v1/tokens/{tokens[0]['id']}/", timeout=10,
                                          headers={"Authorization": f"Bearer {token}"})
        assert revoked.status_code == 204
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), timeout=5)
        assert time.monotonic() - started < 2.5
    assert closed.value.rcvd.code == 4401


@pytest.mark.asyncio
async def test_clients_leaving_mid_stream_of_a_log_end_it_quietly(server, alice, project, pool):
    """A closed tab: the client goes away (here without even a close handshake) while its log
    topics are sending. Many topics make the race (a send between the client leaving and the
    server noticing) happen on nearly every disconnect."""
    replicas = 16
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool, status="running", attempt=1,
                                                    replicas=replicas)
    paths = [replica_log_path(workload.pk, 1, r) for r in range(replicas)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"line {i} {'x' * 200}\n" for i in range(500)))
    token = await sync_to_async(make_token)(alice)
    stop = threading.Event()

    def keep_writing():
        files = [open(path, "a") for path in paths]
        while not stop.is_set():
            for f in files:
                f.write("more " + "y" * 1000 + "\n")
                f.flush()
            time.sleep(0.005)
        for f in files:
            f.close()

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        for attempt in range(10):
            ws = await connect(f"{server.ws_url}/ws/projects/vision/live/", open_timeout=10, origin=ORIGIN,
                               subprotocols=_token_protocols(token), additional_headers={"Authorization": f"Bearer {token}"})
            for r in range(replicas):
                await ws.send(f'{{"action": "subscribe", "topic": "logs:{workload.pk}:{r}"}}')
            for _ in range(replicas * 2 + attempt):
                await asyncio.wait_for(ws.recv(), timeout=10)
            if attempt % 2:
                ws.transport.abort()  # no close handshake
            else:
                await ws.close()  # a browser closing the tab
            await asyncio.sleep(0.03 * (attempt % 4))
        await asyncio.sleep(1.5)  # the server notices, ends the topics, would log here
    finally:
        stop.set()
        writer.join()
    output = server.output()
    for sign in ("failed", "Unexpected ASGI message", "Traceback", "Exception", "ERROR"):
        assert sign not in output, output[-3000:]
