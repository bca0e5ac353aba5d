"""Fixtures for the gateway tests: a real uvicorn server (in a thread of the test process, so it
shares the test database and settings) and replica scripts in the pool's allowed folder."""
import socket
import textwrap
import threading
import time

import pytest
import uvicorn

from tests.backends.helpers import kill_processes_mentioning


@pytest.fixture(autouse=True)
def _kill_replicas(_isolated_data_dir, settings):
    yield
    kill_processes_mentioning(str(settings.CAIRN_DATA_DIR))


@pytest.fixture
def script(shared_dir):
    counter = iter(range(1000))

    def write(source: str) -> str:
        path = shared_dir / f"script_{next(counter)}.py"
        path.write_text(textwrap.dedent(source))
        return str(path)

    return write


class LiveServer:
    def __init__(self):
        from config.asgi import application

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=self.port, lifespan="off",
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
