"""Embedded mode runs the telemetry sampler and the periodic tasks in-process (issue 25, item 2):
a real `manage.py run_embedded` shows the local node's CPU and memory within seconds, and its
periodic-task loop turns (its heartbeat passes `manage.py healthcheck periodic`)."""
import subprocess
import sys
import time

import pytest
import requests

from apps.accounts.services import api_token_create
from apps.clusters.models import Node
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.processes import ROOT, EmbeddedServer, cairn_env, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def test_embedded_mode_shows_the_local_nodes_cpu_and_memory_within_seconds(tmp_path):
    alice = UserFactory(username="alice")
    MembershipFactory(project=ProjectFactory(slug="demo"), user=alice, role="owner")
    token = api_token_create(user=alice, name="test")[1]
    env = cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded", CAIRN_TASKS_IN_PROCESS="1",
                    CAIRN_HEARTBEAT_DIR=str(tmp_path / "heartbeats"))
    server = EmbeddedServer(env, log=tmp_path / "server.log")
    try:
        started = time.monotonic()
        node = wait_for(lambda: Node.objects.filter(cluster__backend="local").first(), timeout=30,
                        message="the local node to be registered")
        headers = {"Authorization": f"Bearer {token}"}

        def metrics() -> set[str]:
            answer = requests.get(f"{server.url}/api/v1/telemetry/nodes/{node.name}/", headers=headers, timeout=10)
            assert answer.status_code == 200, answer.text
            return set(answer.json()["metrics"])

        wanted = {"node.cpu_percent", "node.memory_percent", "node.memory_used_mb"}
        wait_for(lambda: wanted <= metrics(), timeout=20, message=f"CPU and memory telemetry of {node.name}")
        assert time.monotonic() - started < 20
        overview = requests.get(f"{server.url}/api/v1/cluster/overview/", headers=headers, timeout=10).json()
        [row] = [n for pool in overview["pools"] for n in pool["nodes"] if n["name"] == node.name]
        assert row["cpu_percent"] is not None and row["memory_percent"] is not None  # the cluster page's figures

        def healthy(loop: str) -> bool:
            return subprocess.run([sys.executable, "manage.py", "healthcheck", loop], cwd=ROOT, env=env,
                                  capture_output=True).returncode == 0

        for loop in ("periodic", "telemetry", "scheduler", "reconciler", "outbox"):
            wait_for(lambda loop=loop: healthy(loop), timeout=30, message=f"the {loop} loop's heartbeat")
    finally:
        server.stop()
