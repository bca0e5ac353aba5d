"""The sender's HTTP client: keep-alive on plain HTTP, a stale connection retried once, answers
read like requests' (status_code, json(), text)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cairn.tracking.transport import Session


class _Server:
    def __init__(self, *, drop_after_each: bool = False):
        self.connections = 0
        self.bodies = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                outer.connections += 1
                super().setup()

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append((self.path, self.headers.get("Authorization"), json.loads(body)))
                answer = json.dumps({"ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                # An idle keep-alive connection closed by the server, without saying so.
                self.close_connection = drop_after_each

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = _Server()
    yield srv
    srv.stop()


def test_keeps_one_connection_and_answers_like_requests(server):
    session = Session()
    for i in range(3):
        response = session.post(f"{server.url}/runs/1/batches/?x=1", json={"i": i}, headers={"Authorization": "Bearer t"})
        assert response.status_code == 200 and response.json() == {"ok": True} and '"ok"' in response.text
    assert server.connections == 1
    assert server.bodies == [("/runs/1/batches/?x=1", "Bearer t", {"i": i}) for i in range(3)]
    session.close()


def test_a_connection_the_server_closed_is_replaced_transparently():
    srv = _Server(drop_after_each=True)
    try:
        session = Session()
        for i in range(3):
            assert session.post(f"{srv.url}/b/", json={"i": i}).status_code == 200
        assert [b[2]["i"] for b in srv.bodies] == [0, 1, 2]  # each sent once
        assert srv.connections == 3
    finally:
        srv.stop()


def test_refused_connection_raises_for_the_sender_to_retry(refused_url):
    with pytest.raises(OSError):
        Session().post(f"{refused_url}/b/", json={})
