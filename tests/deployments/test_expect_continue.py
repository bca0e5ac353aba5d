"""Issue 44, low item: uploads with `Expect: 100-continue` hung at the gateway until its timeout.
The gateway (uvicorn) answers `100 Continue` itself when it starts reading the body; the header is
hop-by-hop and no longer forwarded, so a replica that does not answer it (an HTTP/1.0 server, say)
is not waited for."""
import socket
import time

import pytest

from apps.backends.local import sandbox
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, wait_for
from tests.deployments.test_gateway import ready
from tests.factories import make_token

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(sandbox.isolation().level not in (sandbox.BWRAP, sandbox.BWRAP_ROOT),
                       reason="bubblewrap is not usable on this host"),
]

# An HTTP/1.0 server (http.server's default): it never answers `Expect: 100-continue` itself.
APP = """
    import os
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_POST(self):
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            expect = self.headers.get("Expect", "")
            body = b"got %d bytes, expect=%s" % (len(data), expect.encode())
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
    print("listening", flush=True)
    server.serve_forever()
"""


def _read_until(sock, marker: bytes, deadline: float) -> bytes:
    data = b""
    while marker not in data and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


def test_an_upload_with_expect_100_continue_is_answered(gateway_server, project, alice, script, settings):
    settings.CAIRN = {**settings.CAIRN, "SERVE_TIMEOUT_SECONDS": 20}
    workload = admitted(kind="deployment", project=project, name="model",
                        spec={"command": ["python", script(APP)], "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == WorkloadStatus.RUNNING
    wait_for(lambda: "listening" in workload_log_read(workload=workload, replica=0), what="the replica to listen")
    ready(workload, 1)

    body = b"x" * 100_000
    with socket.create_connection(("127.0.0.1", gateway_server.port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall((f"POST /serve/{project.slug}/model/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Authorization: Bearer {make_token(alice)}\r\nContent-Length: {len(body)}\r\n"
                      "Expect: 100-continue\r\n\r\n").encode())
        interim = _read_until(sock, b"\r\n\r\n", started + 5)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim  # the client may send its body now
        sock.sendall(body)
        answer = _read_until(sock, b"expect=", started + 10)
        answer += _read_until(sock, b"\n", time.monotonic() + 0.5) if not answer.endswith(b"expect=") else b""
    took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b"got 100000 bytes, expect=" in answer
    assert b"expect=100-continue" not in answer  # hop-by-hop: not passed on to the replica
    assert took < 5, took
