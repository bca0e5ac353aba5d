"""The SDK against a real Cairn server, through a proxy that drops the answer to the first
submit (POST) after the server has handled it (a connection lost on the way back): the SDK retries
with the same Idempotency-Key and gets the first workload, and no second one exists."""
import socket
import threading

import pytest

from apps.accounts.services import api_token_create
from apps.workloads.models import Workload
from cairn import Client

pytestmark = pytest.mark.django_db(transaction=True)


class DropFirstAnswer:
    """A loopback TCP proxy to `target`: it forwards every request, and for the first POST it
    reads the server's whole answer, then closes the client's connection without sending it."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.posts = 0
        self.dropped = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client, socket.create_connection(self.target) as upstream:
            client.settimeout(10)
            upstream.settimeout(10)
            request = b""
            while b"\r\n\r\n" not in request:
                request += client.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            with self.lock:
                if head.startswith(b"POST "):
                    self.posts += 1
                drop = head.startswith(b"POST ") and self.posts == 1
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += client.recv(65536)
            upstream.sendall(head.replace(b"keep-alive", b"close") + b"\r\n\r\n" + body)
            answer = b""
            while chunk := upstream.recv(65536):
                answer += chunk
            if drop:
                self.dropped += 1
                return  # the server did the work; the client never hears of it
            client.sendall(answer)

    def close(self) -> None:
        self.listener.close()


def test_a_submit_whose_answer_is_lost_is_retried_without_a_second_workload(live_server, quota, alice):
    token = api_token_create(user=alice, name="sdk")[1]
    host, port = live_server.url.removeprefix("http://").split(":")
    proxy = DropFirstAnswer((host, int(port)))
    try:
        client = Client(f"http://127.0.0.1:{proxy.port}", token, backoff=0, retries=2)
        workload = client.submit(quota.project.slug, {"name": "once", "command": "true",
                                                      "resources": {"gpu": 0, "cpu": 1}})
    finally:
        proxy.close()
    assert proxy.dropped == 1 and proxy.posts == 2  # (and a GET of the server's kinds before)
    assert Workload.objects.filter(project=quota.project).count() == 1
    assert workload["id"] == Workload.objects.get().pk and workload["name"] == "once"
