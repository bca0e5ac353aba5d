"""X-Forwarded-For through a real uvicorn started with Cairn's options (issue 44, item 5): uvicorn's
default believes the header from 127.0.0.1, where every local job is, so a job forged the audit
log's address and escaped the sign-in throttle with a new address per attempt. Now the header is
believed only from CAIRN_FORWARDED_ALLOW_IPS."""
import socket
import threading
import time

import httpx
import pytest
import uvicorn
from django.core.cache import cache

from apps.audit.models import AuditEvent
from apps.core.proxyheaders import uvicorn_proxy_options

pytestmark = pytest.mark.django_db(transaction=True)


class Server:
    """config.asgi on uvicorn with run_embedded's proxy options, in a thread of the test."""

    def __init__(self):
        from config.asgi import application

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=self.port, lifespan="off",
                                                    log_level="warning", **uvicorn_proxy_options()))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def serve(settings, monkeypatch):
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)  # uvicorn's own default then: 127.0.0.1
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    cache.clear()
    servers = []

    def start(allow):
        settings.CAIRN = {**settings.CAIRN, "FORWARDED_ALLOW_IPS": allow, "TRUSTED_PROXIES": 0}
        servers.append(Server())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
    cache.clear()


def _login(server, forwarded):
    return httpx.post(f"{server.url}/api/v1/auth/login/", json={"username": "alice", "password": "wrong",
                                                                 "token_name": "x"},
                      headers={"X-Forwarded-For": forwarded}, timeout=10)


def test_a_local_client_cannot_forge_its_address_or_escape_the_throttle(serve, alice):
    server = serve([])
    codes = [_login(server, f"198.51.100.{i}").status_code for i in range(25)]
    assert codes[:20] == [401] * 20 and set(codes[20:]) == {429}, codes  # 401: wrong password
    sources = set(AuditEvent.objects.filter(action="auth.login_failed").values_list("source_ip", flat=True))
    assert sources == {"127.0.0.1"}


def test_the_header_is_believed_from_an_allowed_proxy(serve, alice):
    server = serve(["127.0.0.1"])
    assert _login(server, "198.51.100.7").status_code == 401
    assert AuditEvent.objects.get(action="auth.login_failed").source_ip == "198.51.100.7"
    # Each client counts on its own behind the proxy: another address is not throttled by the first.
    codes = [_login(server, "198.51.100.8").status_code for _ in range(21)]
    assert codes[-1] == 429 and _login(server, "198.51.100.9").status_code == 401
