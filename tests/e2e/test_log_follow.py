"""Following logs streams over real HTTP: `manage.py run_embedded` (uvicorn) runs a job that
prints a line and then waits on a gate file; the first line reaches a `curl -N`-like client and
`cairn logs -f` before the gate opens, and both end when the job does."""
import os
import queue
import subprocess
import sys
import textwrap
import threading

import pytest
import requests

from tests.e2e.conftest import in_thread
from tests.processes import ROOT, EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

PASSWORD = "pw-for-tests-123"  # tests/factories.py
GATED = textwrap.dedent("""
    import pathlib, sys, time
    print("first line", flush=True)
    gate, deadline = pathlib.Path(sys.argv[1]), time.monotonic() + 120
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    print("second line", flush=True)
""")


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line if isinstance(line, str) else line.decode())
    into.put(None)


def _until(lines: queue.Queue, text: str, timeout: float) -> str:
    """What arrived up to and including the first line containing `text`."""
    seen = ""
    while True:
        line = lines.get(timeout=timeout)  # queue.Empty: nothing arrived in time
        assert line is not None, f"the stream ended before {text!r}: {seen!r}"
        seen += line
        if text in line:
            return seen


def test_http_follow_and_cli_follow_receive_lines_as_they_are_written(tmp_path, shared_dir, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's

    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared_dir)]  # sandboxed replicas see only allowed folders
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug="e2e")
        MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=8000, nominal_memory_mb=16384)

    in_thread(seed)
    (shared_dir / "gated.py").write_text(GATED)
    gate = shared_dir / "gate"
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1", CAIRN_SCHEDULER_INTERVAL="0.3",
                                      CAIRN_RECONCILER_INTERVAL="0.3"), log=tmp_path / "server.log")
    cli_process = None
    try:
        token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                              timeout=10).json()["token"]
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        api = f"{server.url}/api/v1/projects/e2e/training-jobs/"
        created = http.post(api, json={"name": "gated", "command": ["python", str(shared_dir / "gated.py"), str(gate)],
                                       "resources": {"cpu": 0.5, "memory": "256Mi"}}, timeout=10)
        assert created.status_code == 201, created.text
        job = created.json()["id"]

        # over HTTP, as `curl -sN ".../logs/?follow=1"` reads it
        follow = http.get(f"{api}{job}/logs/", params={"follow": 1}, stream=True, timeout=(10, 120))
        assert follow.status_code == 200 and follow.headers["Content-Type"].startswith("text/plain")
        http_lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(follow.iter_lines(chunk_size=1, decode_unicode=True), http_lines),
                         daemon=True).start()

        # through the CLI, as `cairn logs -f gated` prints it
        env = {**os.environ, "CAIRN_CONFIG": str(tmp_path / "cli.json"), "CAIRN_URL": server.url,
               "CAIRN_TOKEN": token, "CAIRN_PROJECT": "e2e", "PYTHONUNBUFFERED": "1"}
        cli_process = subprocess.Popen([sys.executable, "-m", "cairn", "logs", "-f", "gated"], env=env, cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cli_lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(cli_process.stdout, cli_lines), daemon=True).start()

        # the job is waiting at the gate, and will not print again until it opens
        assert "first line" in _until(http_lines, "first line", timeout=60)
        assert "first line" in _until(cli_lines, "first line", timeout=60)
        assert not gate.exists()

        gate.touch()
        assert "second line" in _until(http_lines, "second line", timeout=60)
        assert "second line" in _until(cli_lines, "second line", timeout=60)
        assert http_lines.get(timeout=30) is None  # the follow ends with the job
        assert cli_process.wait(30) == 0, cli_process.stderr.read()
        assert http.get(f"{api}{job}/", timeout=10).json()["status"] == "succeeded"
    finally:
        if cli_process is not None and cli_process.poll() is None:
            cli_process.kill()
        gate.touch()
        server.stop()
