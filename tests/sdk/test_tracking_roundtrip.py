"""The SDK against a real Cairn server process on the test PostgreSQL: a job launched by the
local backend logs through the injected run token and the points are read back through the API;
a training script keeps running while the server is stopped and its buffered points arrive when
the server returns."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

import pytest
import requests
from django.utils import timezone

from apps.tracking.models import MetricChunk, Run
from apps.tracking.services import run_token_create
from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory, WorkloadFactory
from tests.processes import Process, cairn_env, wait_for
from tests.tracking.factories import stored_points

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TRAIN = textwrap.dedent("""
    import sys, time, pathlib
    import cairn
    steps, pause, progress = int(sys.argv[1]), float(sys.argv[2]), pathlib.Path(sys.argv[3])
    cairn.init(system_metrics=False)
    cairn.log_params({"lr": 0.001, "optimizer": "adam"})
    for step in range(steps):
        cairn.log({"loss": 1.0 / (step + 1), "acc": step / steps}, step=step)
        progress.with_suffix(".tmp").write_text(str(step))
        progress.with_suffix(".tmp").replace(progress)  # atomic: the test never sees a half-written file
        time.sleep(pause)
    print("training done", flush=True)
    assert cairn.finish(timeout=60)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp_path, port):
        self.tmp, self.port, self.proc, self.starts = tmp_path, port, None, 0
        self.url = f"http://127.0.0.1:{port}"

    def start(self):
        self.starts += 1
        self.proc = Process([sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                             "--port", str(self.port), "--log-level", "warning"],
                            cairn_env(), self.tmp / f"server-{self.starts}.log")
        wait_for(self._up, timeout=60, message="the server to answer")

    def _up(self) -> bool:
        try:
            return requests.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except requests.RequestException:  # refused, or slow to answer on a busy machine
            return False

    def stop(self):
        self.proc.stop()


@pytest.fixture
def server(tmp_path, settings):
    settings.CAIRN_DATA_DIR = tmp_path / "data"
    settings.CAIRN_DATA_DIR.mkdir()
    srv = Server(tmp_path, _free_port())
    srv.start()
    yield srv
    srv.stop()


def test_job_logs_through_injected_run_token_and_points_read_back(server, shared_dir, settings, client_for):
    from apps.backends.services import workload_dispatch
    from apps.clusters.services import local_cluster_register
    from apps.workloads.choices import WorkloadStatus
    from tests.backends.helpers import reconcile_until

    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": server.url}
    node = local_cluster_register()
    node.pool.allowed_paths = [str(shared_dir)]
    node.pool.save(update_fields=["allowed_paths"])
    user = UserFactory(username="erin")
    project = ProjectFactory(slug="vision")
    MembershipFactory(project=project, user=user, role="owner")
    QuotaFactory(project=project, pool=node.pool)
    script = shared_dir / "train.py"
    script.write_text(TRAIN)
    workload = WorkloadFactory(project=project, pool=node.pool, name="mnist", status=WorkloadStatus.ADMITTED,
                               admitted_at=timezone.now(), placement=[{"replica": 0, "node": node.name}],
                               spec={"command": ["python", str(script), "500", "0", str(shared_dir / "progress")]})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, WorkloadStatus.SUCCEEDED, timeout=90)

    run = Run.objects.get(workload=workload, attempt=1)
    assert run.status == "finished" and run.project == project
    client = client_for(user)
    body = client.get(f"/api/v1/projects/vision/runs/{run.pk}/series/", {"key": "loss", "max_points": 1000}).json()
    assert body["count"] == 500 and body["points"][0] == [0, 1.0] and body["points"][-1] == [499, 1 / 500]
    detail = client.get(f"/api/v1/projects/vision/runs/{run.pk}/").json()
    assert detail["params"] == {"lr": 0.001, "optimizer": "adam"}
    assert detail["summaries"]["acc"]["last"] == 499 / 500


def _read_step(path) -> int:
    """The step the script last wrote (read once per try: two reads could straddle a rewrite)."""
    def step():
        text = path.read_text().strip() if path.exists() else ""
        return (int(text),) if text.isdigit() else None  # a tuple, so step 0 counts as read
    return wait_for(step, timeout=5, interval=0.01, message="progress")[0]


def test_training_survives_server_outage_and_buffered_points_arrive(server, tmp_path):
    project = ProjectFactory(slug="vision")
    run = Run.objects.create(project=project, name="outage")
    token = run_token_create(run=run)
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    progress = tmp_path / "progress"
    steps = 400
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CAIRN_API_URL": server.url, "CAIRN_PROJECT": "vision",
           "CAIRN_RUN_ID": str(run.pk), "CAIRN_RUN_TOKEN": token}
    job = subprocess.Popen([sys.executable, str(script), str(steps), "0.02", str(progress)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: MetricChunk.objects.filter(run=run).exists(), timeout=30, message="first points")
        server.stop()
        stopped_at = _read_step(progress)
        time.sleep(2.0)
        assert job.poll() is None, "the training script must keep running while the server is away"
        assert _read_step(progress) > stopped_at + 20, "training kept making progress"
        server.start()
        output, _ = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, output
    assert "training done" in output and "server unreachable" in output
    assert len(stored_points(run, "loss")) == steps
    assert sorted(step for _, step, _ in stored_points(run, "acc")) == list(range(steps))
    run.refresh_from_db()
    assert run.status == "finished"


RANK = textwrap.dedent("""
    import os, sys, time
    import cairn
    rank = int(os.environ["CAIRN_REPLICA"])
    cairn.init(system_metrics=False)
    for step in range(int(sys.argv[1])):
        cairn.progress(step, seconds=0.01)
        if rank == 0:
            cairn.log({"loss": 1.0 / (step + 1)}, step=step)
    if rank == 0:
        time.sleep(float(sys.argv[2]))  # rank 1 finishes first, as a faster rank does
    assert cairn.finish(timeout=60)
""")


def test_a_rank_that_finishes_first_does_not_end_the_run_under_rank_zero(server, tmp_path):
    """Every rank of a job reports to the job's run; rank 0 logs the metrics. Rank 1's finish()
    ended the whole run, and rank 0's last points then got 409 (seen in the self-healing test)."""
    project = ProjectFactory(slug="vision")
    workload = WorkloadFactory(project=project, name="ddp", replicas=2)
    run = Run.objects.create(project=project, name="ddp", workload=workload, attempt=1)
    token = run_token_create(run=run)
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CAIRN_API_URL": server.url, "CAIRN_PROJECT": "vision",
            "CAIRN_RUN_ID": str(run.pk), "CAIRN_RUN_TOKEN": token, "CAIRN_WORKLOAD_ID": str(workload.pk)}
    ranks = [subprocess.Popen([sys.executable, str(script), "50", "2.0"], env={**base, "CAIRN_REPLICA": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    outputs = [rank.communicate(timeout=90)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], outputs
    assert "rejected" not in outputs[0], outputs[0]
    assert sorted(step for _, step, _ in stored_points(run, "loss")) == list(range(50))
    run.refresh_from_db()
    assert run.status == "finished"  # by rank 0
