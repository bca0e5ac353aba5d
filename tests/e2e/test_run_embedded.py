"""`make run PORT=...`: the port reaches run_embedded; a busy port is a clear error (exit code
1, the port named, how to choose another); the ready line is printed only once the server
accepts connections."""
import socket
import subprocess
import sys
import time

import pytest

from tests.processes import ROOT, cairn_env, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def _env(tmp_path) -> dict:
    return cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded", CAIRN_TASKS_IN_PROCESS="1")


def test_make_run_passes_port_and_host_to_run_embedded():
    dry = subprocess.run(["make", "-n", "run", "PORT=8123", "HOST=0.0.0.0"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert "manage.py run_embedded --host 0.0.0.0 --port 8123" in dry.stdout, dry.stdout + dry.stderr
    default = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**_env_without_port(), "PORT": "9999"})
    assert "manage.py run_embedded --host 127.0.0.1 --port 8000" in default.stdout  # an exported PORT is not taken


def _env_without_port() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "PORT"}


def test_a_busy_port_is_a_clear_error(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run([sys.executable, "manage.py", "run_embedded", "--no-demo", "--port", str(port)],
                                cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert f"make run PORT={port + 1}" in result.stderr and "Traceback" not in result.stderr
    assert "Cairn is running" not in result.stdout
    assert time.monotonic() - started < 60  # refused before migrating or starting anything


def test_the_ready_line_comes_once_the_port_accepts_connections(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "manage.py", "run_embedded", "--no-demo", "--port", str(port)],
                              cwd=ROOT, env={**_env(tmp_path), "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output = ""
        for line in server.stdout:
            output += line
            if "Cairn is running" in line:
                # the very moment the line is out, a connection is accepted and answered
                with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                    conn.sendall(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    assert conn.recv(100).startswith(b"HTTP/1.1 200")
                break
        assert f"Cairn is running at http://127.0.0.1:{port}" in output, output
    finally:
        import os
        import signal

        os.killpg(server.pid, signal.SIGINT)
        server.wait(30)
