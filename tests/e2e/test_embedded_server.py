"""The whole path on real processes: HTTP API -> PostgreSQL -> scheduler -> local replicas ->
status and logs, served by `manage.py run_embedded`, including a kill -9 of the server."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
import requests

from apps.workloads.models import Workload
from tests.e2e.conftest import spare_node
from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory
from tests.processes import ROOT, cairn_env, manage, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RANK_CHECK = textwrap.dedent("""
    import os, sys, time
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert world == 2 and rank in (0, 1), (rank, world)
    assert os.environ["MASTER_ADDR"] and int(os.environ["MASTER_PORT"]) > 0
    print(f"hello from rank {rank} of {world}", flush=True)
    time.sleep(float(os.environ.get("NAP", "0")))
    print(f"rank {rank} done", flush=True)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server_env(tmp_path, shared_dir, settings):
    from apps.clusters.services import local_cluster_register

    # the server process checks passwords with the production hasher
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    node = local_cluster_register()
    node.pool.allowed_paths = [str(shared_dir)]  # replicas run sandboxed: they see only allowed folders
    node.pool.save(update_fields=["allowed_paths"])
    user = UserFactory(username="erin")
    project = ProjectFactory(slug="e2e")
    MembershipFactory(project=project, user=user, role="owner")
    QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=8000, nominal_memory_mb=16384)
    script = shared_dir / "rank_check.py"
    script.write_text(RANK_CHECK)
    port = _free_port()
    env = cairn_env(CAIRN_TASKS_IN_PROCESS="1", CAIRN_PUBLIC_URL=f"http://127.0.0.1:{port}",
                    CAIRN_SCHEDULER_INTERVAL="0.3", CAIRN_RECONCILER_INTERVAL="0.3")
    return {"env": env, "port": port, "script": script, "tmp": tmp_path, "node": node}


def _start(server_env, name):
    port = server_env["port"]
    proc = manage("run_embedded", "--no-demo", "--port", str(port), env=server_env["env"],
                  log=server_env["tmp"] / f"{name}.log")
    wait_for(lambda: _up(port), timeout=60, message="the server to answer")
    return proc


def _up(port) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except requests.ConnectionError:
        return False


def _login(port) -> requests.Session:
    session = requests.Session()
    token = session.post(f"http://127.0.0.1:{port}/api/v1/auth/login/",
                         json={"username": "erin", "password": "pw-for-tests-123"}).json()["token"]
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def test_two_replica_job_runs_and_its_logs_are_served(server_env):
    server = _start(server_env, "server")
    try:
        api = f"http://127.0.0.1:{server_env['port']}/api/v1/projects/e2e"
        http = _login(server_env["port"])
        created = http.post(f"{api}/training-jobs/", json={
            "name": "ranks", "command": ["python", str(server_env["script"])], "replicas": 2,
            "resources": {"cpu": 0.5, "memory": "256Mi"}})
        assert created.status_code == 201, created.text
        job = created.json()["id"]
        final = wait_for(lambda: (w := http.get(f"{api}/training-jobs/{job}/").json())["status"] in
                         ("succeeded", "failed") and w, timeout=60, message="the job to finish")
        assert final["status"] == "succeeded" and final["exit_code"] == 0, final
        for rank in (0, 1):
            logs = http.get(f"{api}/training-jobs/{job}/logs/", params={"replica": rank})
            assert logs.status_code == 200
            assert f"hello from rank {rank} of 2" in logs.text and f"rank {rank} done" in logs.text
        reasons = [e["reason"] for e in http.get(f"{api}/training-jobs/{job}/events/").json()["results"]]
        assert reasons[:2] == ["Submitted", "Admitted"] and reasons[-1] == "Succeeded"
    finally:
        server.stop(signal.SIGINT)


def test_kill_9_of_the_server_while_a_job_runs(server_env):
    server = _start(server_env, "server-1")
    api = f"http://127.0.0.1:{server_env['port']}/api/v1/projects/e2e"
    http = _login(server_env["port"])
    job = http.post(f"{api}/training-jobs/", json={
        "name": "survivor", "command": ["python", str(server_env["script"])], "replicas": 2,
        "env": {"NAP": "4"}, "resources": {"cpu": 0.5, "memory": "256Mi"}}).json()["id"]
    try:
        wait_for(lambda: Workload.objects.get(pk=job).status == "running", timeout=60, message="running")
        os.killpg(server.popen.pid, signal.SIGKILL)
        server.popen.wait(10)
        assert Workload.objects.get(pk=job).status == "running"  # nobody is watching now
    finally:
        server.stop()
    restarted = _start(server_env, "server-2")
    try:
        wait_for(lambda: Workload.objects.get(pk=job).status in ("succeeded", "failed", "lost"), timeout=60,
                 message="the job to reach its final state after the restart")
        workload = Workload.objects.get(pk=job)
        assert workload.status == "succeeded" and workload.exit_code == 0 and workload.attempt == 1
        logs = http.get(f"{api}/training-jobs/{job}/logs/", params={"replica": 1}).text
        assert "rank 1 done" in logs
    finally:
        restarted.stop(signal.SIGINT)


def test_cli_submit_follow_against_the_real_server(server_env):
    server = _start(server_env, "server")
    port = server_env["port"]
    config = server_env["tmp"] / "cli.json"
    env = {**os.environ, "CAIRN_CONFIG": str(config)}
    env.pop("CAIRN_TOKEN", None)
    cli = [sys.executable, "-m", "cairn"]
    try:
        login = subprocess.run([*cli, "login", "--url", f"http://127.0.0.1:{port}", "--username", "erin",
                                "--password-stdin"], input="pw-for-tests-123\n", env=env, capture_output=True,
                               text=True, timeout=60, cwd=ROOT)
        assert login.returncode == 0, login.stderr
        job_file = server_env["tmp"] / "job.yaml"
        job_file.write_text(f"kind: training\nproject: e2e\nname: from-cli\ncommand: python {server_env['script']}\n"
                            "replicas: 2\nresources: {cpu: 0.5, memory: 256Mi}\n")
        submit = subprocess.run([*cli, "submit", str(job_file), "--follow"], env=env, capture_output=True,
                                text=True, timeout=120, cwd=ROOT)
        assert submit.returncode == 0, submit.stdout + submit.stderr
        assert "hello from rank 0 of 2" in submit.stdout
        listing = subprocess.run([*cli, "ls", "--project", "e2e"], env=env, capture_output=True, text=True,
                                 timeout=60, cwd=ROOT)
        assert "from-cli" in listing.stdout and "succeeded" in listing.stdout
        missing = subprocess.run([*cli, "logs", "no-such-job", "--project", "e2e"], env=env, capture_output=True,
                                 text=True, timeout=60, cwd=ROOT)
        assert missing.returncode != 0 and "Traceback" not in missing.stderr and missing.stderr.strip()

        # More CPU than the project's quota: it waits, and `cairn queue` says why (a cordoned
        # 32-core spare makes it work the pool could run; larger than every node, it is refused).
        spare_node(add=True, name="spare-32")
        big = server_env["tmp"] / "big.yaml"
        big.write_text("kind: training\nproject: e2e\nname: too-big\ncommand: python -c pass\n"
                       "resources: {cpu: 10, memory: 256Mi}\n")
        assert subprocess.run([*cli, "submit", str(big)], env=env, capture_output=True, text=True, timeout=60,
                              cwd=ROOT).returncode == 0
        wait_for(lambda: Workload.objects.filter(name="too-big").exclude(pending_reason="").exists(), timeout=30,
                 message="a pending reason")
        queue = subprocess.run([*cli, "queue", "--json"], env=env, capture_output=True, text=True, timeout=60,
                               cwd=ROOT)
        assert queue.returncode == 0, queue.stderr
        [entry] = json.loads(queue.stdout)
        assert entry["name"] == "too-big" and entry["position"] == 1 and entry["mine"] is True
        assert entry["pending_reason"].startswith("quota:")
        table = subprocess.run([*cli, "queue"], env={**env, "COLUMNS": "200"}, capture_output=True, text=True,
                               timeout=60, cwd=ROOT)
        assert "too-big" in table.stdout and "quota:" in table.stdout
        unknown = subprocess.run([*cli, "queue", "nope"], env=env, capture_output=True, text=True, timeout=60,
                                 cwd=ROOT)
        assert unknown.returncode == 1 and "Resource pool not found." in unknown.stderr
    finally:
        server.stop(signal.SIGINT)
