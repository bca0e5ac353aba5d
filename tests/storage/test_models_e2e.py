"""A real job registers its output with `cairn.register_model` through a real Cairn server; a
deployment of the model sees it read-only at /model (local backend, real processes)."""
import pytest
from django.utils import timezone

from apps.backends.local import sandbox
from apps.storage.models import ModelVersion
from apps.tracking.models import Run
from apps.workloads.choices import WorkloadStatus
from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory, WorkloadFactory
from tests.sdk.test_tracking_roundtrip import Server, _free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TRAIN = """
import os, pathlib, cairn
cairn.init(system_metrics=False)
cairn.log_params({"lr": 0.01})
cairn.log({"loss": 0.25}, step=10)
out = pathlib.Path("model-out")
out.mkdir(exist_ok=True)
(out / "weights.txt").write_text("trained weights")
version = cairn.register_model("tiny", out)
print("registered", version["ref"], flush=True)
cairn.finish()
"""
SERVE = """
import os, pathlib
print("serving", pathlib.Path(os.environ["CAIRN_MODEL_DIR"], "weights.txt").read_text(), flush=True)
try:
    open(os.path.join(os.environ["CAIRN_MODEL_DIR"], "x"), "w")
except OSError as exc:
    print("model is read-only:", exc.errno, flush=True)
"""


@pytest.fixture
def server(tmp_path, settings):
    srv = Server(tmp_path, _free_port())
    srv.start()
    yield srv
    srv.stop()


def test_a_job_registers_its_model_and_a_deployment_serves_it_read_only(server, shared_dir, settings, client_for):
    if sandbox.isolation().level not in (sandbox.BWRAP_ROOT, sandbox.BWRAP):
        pytest.skip("the /model mount needs the bubblewrap sandbox; this host has none (docs/data.md)")
    from apps.backends.services import workload_dispatch
    from apps.clusters.services import local_cluster_register
    from tests.backends.helpers import kill_processes_mentioning, log_file, reconcile_until

    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": server.url}
    node = local_cluster_register()
    node.pool.allowed_paths = [str(shared_dir)]
    node.pool.save(update_fields=["allowed_paths"])
    user = UserFactory(username="erin")
    project = ProjectFactory(slug="vision")
    MembershipFactory(project=project, user=user, role="owner")
    QuotaFactory(project=project, pool=node.pool)
    (shared_dir / "train.py").write_text(TRAIN)
    (shared_dir / "serve.py").write_text(SERVE)
    try:
        job = WorkloadFactory(project=project, pool=node.pool, name="train", status=WorkloadStatus.ADMITTED,
                              admitted_at=timezone.now(), placement=[{"replica": 0, "node": node.name}],
                              spec={"command": ["python", str(shared_dir / "train.py")]})
        workload_dispatch(workload_id=job.pk)
        reconcile_until(job, WorkloadStatus.SUCCEEDED, timeout=90)
        assert "registered tiny@1" in log_file(job, attempt=1).read_text()
        version = ModelVersion.objects.get(model__project=project, model__name="tiny", number=1)
        run = Run.objects.get(workload=job, attempt=1)
        assert version.run_id == run.pk and version.workload_id == job.pk
        assert version.params == {"lr": 0.01} and version.metrics["loss"]["last"] == 0.25

        client = client_for(user)
        deployment = client.post("/api/v1/projects/vision/deployments/", {
            "command": ["python", str(shared_dir / "serve.py")], "pool": node.pool.name, "model": "tiny@1"},
            format="json").json()
        assert deployment["model_source"]["run"] == run.pk and deployment["model_source"]["workload"] == job.pk
        from apps.workloads.models import Workload

        serving = Workload.objects.get(pk=deployment["id"])
        Workload.objects.filter(pk=serving.pk).update(status=WorkloadStatus.ADMITTED, admitted_at=timezone.now(),
                                                      placement=[{"replica": 0, "node": node.name}])
        workload_dispatch(workload_id=serving.pk)
        serving.refresh_from_db()
        log = log_file(serving, attempt=1)
        from tests.backends.helpers import wait_for

        wait_for(lambda: "model is read-only" in (log.read_text() if log.exists() else ""), timeout=30,
                 what="the deployment's output")
        text = log.read_text()
        assert "serving trained weights" in text and "model is read-only: 30" in text
    finally:
        kill_processes_mentioning(str(settings.CAIRN_DATA_DIR))
