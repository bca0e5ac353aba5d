"""Fixtures for the gateway tests: a real uvicorn server (in a thread of the test process, so it
shares the test database and settings) and replica scripts in the pool's allowed folder."""
import socket
import threading
import time

import pytest
import uvicorn

# The local-backend fixtures: replicas killed after each test, scripts in the allowed folder.
from tests.backends.conftest import _kill_replicas, script  # noqa: E402, F401


class LiveServer:
    def __init__(self):
        from config.asgi import application

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=self.port, lifespan="on",
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("uvicorn did not start")
            time.sleep(0.02)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def gateway_server(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    server = LiveServer()
    yield server
    server.stop()
