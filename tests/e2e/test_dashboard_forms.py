"""The submit form covers what the API accepts for each kind (issue 46, items 4 and 5), in a real
browser (Debian's chromium through Playwright) against a live Cairn (`manage.py run_embedded` on
the test PostgreSQL). The server runs without code-server (CAIRN_CODE_SERVER points nowhere), so a
VS Code notebook is refused at submit, the API's reason shown on the IDE field; a JupyterLab one
with an idle timeout is made, and the two IDEs tell apart in the workloads list."""
import re
import time

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import PASSWORD, field, sign_in
from tests.processes import EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
UI = 15_000


def _seed(shared: str) -> None:
    from apps.clusters.services import local_cluster_register
    from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory, WorkloadFactory

    node = local_cluster_register()
    node.pool.allowed_paths = [shared]
    node.pool.save(update_fields=["allowed_paths"])
    project = ProjectFactory(slug="dash", name="Dashboard")
    erin = UserFactory(username="erin")
    MembershipFactory(project=project, user=erin, role="owner")
    # Half a CPU of quota: what the tests submit (1 CPU each) waits on quota, nothing is launched.
    QuotaFactory(project=project, pool=node.pool, nominal_gpu_milli=0, nominal_cpu_milli=500, nominal_memory_mb=4096)
    WorkloadFactory(project=project, pool=node.pool, kind="notebook", name="old-code", status="stopped",
                    created_by=erin, spec={"env": {}, "ide": "vscode"})


@pytest.fixture
def server(tmp_path, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    shared.chmod(0o777)
    in_thread(lambda: _seed(str(shared)))
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1", CAIRN_CODE_SERVER=str(tmp_path / "no-code-server")),
                            log=tmp_path / "server.log")
    server.shared = shared
    try:
        yield server
    finally:
        server.stop()


def _api(server):
    token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                          timeout=10).json()["token"]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def test_the_notebook_form_chooses_the_ide_and_idle_timeout_and_says_when_vscode_cannot_run(server, new_page):
    page = new_page(server.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    # the list tells a VS Code notebook from others
    old = page.get_by_test_id("workload-row").filter(has_text="old-code")
    expect(old.get_by_test_id("ide-badge")).to_have_attribute("data-ide", "vscode", timeout=UI)
    expect(old.get_by_test_id("ide-badge")).to_contain_text("VS Code")

    page.goto("/projects/dash/workloads/new?kind=notebook")
    form = page.get_by_test_id("submit-form")
    field(page, "Name").fill("code")
    field(page, "Memory").fill("512Mi")
    page.get_by_test_id("ide-choice").get_by_text("VS Code").click()
    # a duration without a unit is refused in the browser
    field(page, "Idle timeout").fill("45")
    page.get_by_test_id("submit-workload").click()
    expect(field(page, "Idle timeout")).to_have_attribute("aria-invalid", "true", timeout=UI)
    expect(form).to_contain_text("“45” has no unit")
    field(page, "Idle timeout").fill("45m")
    expect(form).to_contain_text("Stopped after 45 min idle")
    page.get_by_test_id("submit-workload").click()
    # this server has no code-server: refused at submit, the API's reason on the IDE field
    expect(page.get_by_test_id("ide-error")).to_contain_text("make code-server", timeout=UI)
    expect(page.get_by_test_id("submit-field-errors")).to_contain_text("IDE")
    expect(page).to_have_url(re.compile(r"/workloads/new"))

    page.get_by_test_id("ide-choice").get_by_text("JupyterLab").click()
    page.get_by_test_id("submit-workload").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads/notebook/\d+$"), timeout=UI)
    notebook = int(page.url.rsplit("/", 1)[1])
    expect(page.get_by_test_id("ide-badge")).to_have_attribute("data-ide", "jupyterlab", timeout=UI)
    api = _api(server)
    body = api.get(f"{server.url}/api/v1/projects/dash/notebooks/{notebook}/", timeout=10).json()
    assert body["spec"]["ide"] == "jupyterlab" and body["spec"]["idle_timeout"] == 2700, body["spec"]
    api.post(f"{server.url}/api/v1/projects/dash/notebooks/{notebook}/stop/", timeout=10)

    page.goto("/projects/dash/workloads")
    made = page.get_by_test_id("workload-row").filter(has_text="code").filter(has_not_text="old-code")
    expect(made.get_by_test_id("ide-badge")).to_have_attribute("data-ide", "jupyterlab", timeout=UI)


def test_the_deployment_form_makes_the_readmes_deployment_with_autoscaling_and_shows_the_apis_errors(server, new_page):
    page = new_page(server.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    page.goto("/projects/dash/workloads/new?kind=deployment")
    form = page.get_by_test_id("submit-form")
    field(page, "Name").fill("digits")
    field(page, "Command").fill("python examples/serve_digits.py")
    field(page, "Working directory").fill(str(server.shared))
    field(page, "CPUs").fill("0.5")
    field(page, "Readiness path").fill("healthz")  # no leading slash: the API refuses it
    page.get_by_role("switch", name="Scale replicas on the requests in flight").check()
    field(page, "Min replicas").fill("2")
    field(page, "Max replicas").fill("1")
    page.get_by_test_id("submit-workload").click()
    # the API's 400, each message next to its field
    expect(field(page, "Readiness path")).to_have_attribute("aria-invalid", "true", timeout=UI)
    expect(field(page, "Min replicas")).to_have_attribute("aria-invalid", "true")
    expect(form).to_contain_text("Must not be above max_replicas.")
    expect(page).to_have_url(re.compile(r"/workloads/new"))

    field(page, "Readiness path").fill("/healthz")
    field(page, "Min replicas").fill("1")
    field(page, "Max replicas").fill("3")
    field(page, "Target requests per replica").fill("4")
    page.get_by_role("checkbox", name=re.compile("^Public")).check()
    page.get_by_test_id("submit-workload").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads/deployment/\d+$"), timeout=UI)
    deployment = int(page.url.rsplit("/", 1)[1])
    api = _api(server)
    spec = api.get(f"{server.url}/api/v1/projects/dash/deployments/{deployment}/", timeout=10).json()["spec"]
    assert spec["working_dir"] == str(server.shared) and spec["readiness_path"] == "/healthz", spec
    assert spec["public"] is True and spec["autoscaling"]["max_replicas"] == 3, spec
    assert spec["autoscaling"]["min_replicas"] == 1 and spec["autoscaling"]["target_concurrency"] == 4, spec
    api.post(f"{server.url}/api/v1/projects/dash/deployments/{deployment}/stop/", timeout=10)


def test_the_training_form_mounts_volumes_and_datasets(server, new_page):
    api = _api(server)
    made = api.post(f"{server.url}/api/v1/projects/dash/volumes/", json={"name": "scratch", "size_gb": 1}, timeout=10)
    assert made.status_code == 201, made.text
    page = new_page(server.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    page.goto("/projects/dash/workloads/new?kind=training")
    field(page, "Name").fill("mounted")
    field(page, "Command").fill("ls /data")
    field(page, "Volumes").fill("scratch:not/absolute")
    page.get_by_test_id("submit-workload").click()
    expect(field(page, "Volumes")).to_have_attribute("aria-invalid", "true", timeout=UI)
    field(page, "Volumes").fill("scratch:/mnt/scratch:ro")
    field(page, "Datasets").fill("no-such-set@1")
    page.get_by_test_id("submit-workload").click()
    expect(page.get_by_test_id("submit-form")).to_contain_text("no-such-set", timeout=UI)
    field(page, "Datasets").fill("")
    page.get_by_test_id("submit-workload").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads/training/\d+$"), timeout=UI)
    job = int(page.url.rsplit("/", 1)[1])
    spec = api.get(f"{server.url}/api/v1/projects/dash/training-jobs/{job}/", timeout=10).json()["spec"]
    assert spec["volumes"] == [{"name": "scratch", "mount": "/mnt/scratch", "read_only": True}], spec
    api.post(f"{server.url}/api/v1/projects/dash/training-jobs/{job}/stop/", timeout=10)


def _seed_scaled_deployment() -> int:
    """A deployment that started with 1 replica and was scaled to 3 by its autoscaler, all ready
    (rows only: the reconciler is slowed down so that nothing checks on them; min_replicas 3 keeps
    the autoscaler, which sees no traffic, from scaling it down meanwhile)."""
    from apps.clusters.models import ResourcePool
    from apps.deployments.models import DeploymentScale
    from apps.projects.models import Project
    from tests.factories import WorkloadFactory

    deployment = WorkloadFactory(
        project=Project.objects.get(slug="dash"), pool=ResourcePool.objects.get(), kind="deployment", name="scaled",
        status="running", replicas=3, cpu_milli=100, status_reason="Started", status_message="Started 1 replica(s).",
        spec={"command": ["serve"], "env": {}, "readiness_path": "/healthz", "public": False,
              "autoscaling": {"min_replicas": 3, "max_replicas": 5, "target_concurrency": 2.0}},
        runtime={"backend": "local", "attempt": 1, "alive": True,
                 "replicas": [{"replica": i, "ready": True} for i in range(3)]})
    DeploymentScale.objects.create(workload=deployment, desired=3)
    return deployment.pk


def test_the_deployment_page_shows_desired_and_ready_replicas_and_autoscaling(tmp_path, settings, new_page):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    in_thread(lambda: _seed(str(shared)))
    beats = tmp_path / "beats"
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1", CAIRN_RECONCILER_INTERVAL="3600",
                                      CAIRN_SCHEDULER_INTERVAL="3600", CAIRN_HEARTBEAT_DIR=str(beats)),
                            log=tmp_path / "server.log")
    try:
        # The seeded deployment has no processes: made before the reconciler's first pass, that pass
        # would find its replicas gone and start them again (0 of 3 ready). Its next pass is in an hour.
        deadline = time.monotonic() + 60
        while not (beats / "reconciler").exists():
            assert time.monotonic() < deadline, "the embedded server's reconciler never made a pass"
            time.sleep(0.1)
        deployment = in_thread(_seed_scaled_deployment)
        page = new_page(server.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
        page.goto(f"/projects/dash/workloads/deployment/{deployment}")
        line = page.get_by_test_id("status-line")
        expect(line).to_have_text("Serving: 3 of 3 replicas ready", timeout=UI)
        expect(line).not_to_contain_text("Started 1 replica")
        expect(page.get_by_test_id("replica-counts")).to_have_text("3 ready / 3 desired")
        panel = page.get_by_test_id("scaling-panel")
        expect(panel.get_by_test_id("scaling-mode")).to_have_text("Autoscaling")
        expect(panel.get_by_test_id("autoscaling-min")).to_have_text("3")
        expect(panel.get_by_test_id("autoscaling-max")).to_have_text("5")
        expect(panel.get_by_test_id("autoscaling-target")).to_have_text("2 / replica")
        expect(panel.get_by_test_id("gateway-url")).to_contain_text("/serve/dash/scaled/")
    finally:
        server.stop()
