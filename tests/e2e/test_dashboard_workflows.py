"""What a researcher does from the dashboard beyond the happy path (issue 46, items 9-12), in a
real browser (Debian's chromium through Playwright) against a live Cairn (`manage.py
run_embedded` on the test PostgreSQL). One server for the module; its project has half a CPU of
quota, so what the tests submit waits in the queue and nothing needs to run:

- Clone fills the submit form from a failed job, Run again makes a linked job, Stop asks first
  and gives the focus back to Stop when cancelled; the list says why work failed;
- the Notebooks and Deployments pages show their columns, the project overview says what runs,
  what waits (in plain words) and what failed of what, and an owner deletes a project;
- a sweep made from the new-sweep form (the API's message next to its field) says why its
  waiting trial waits, in words; the comparison view's parallel coordinates draw each run in its
  curve's colour, with a legend that says so.
"""
import re
import subprocess
import sys

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import PASSWORD, SDK_RUN, field, sign_in
from tests.processes import EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(240)]
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
    MembershipFactory(project=ProjectFactory(slug="scratch", name="Scratch"), user=erin, role="owner")
    QuotaFactory(project=project, pool=node.pool, nominal_gpu_milli=0, nominal_cpu_milli=500, nominal_memory_mb=4096)
    WorkloadFactory(project=project, pool=node.pool, kind="training", name="broken", status="failed", created_by=erin,
                    status_reason="ReplicaFailed", status_message="Replica 0 exited with code 3.", exit_code=3,
                    attempt=1, cpu_milli=1000, memory_mb=512,
                    spec={"command": ["/bin/sh", "-c", "python train.py --lr 0.1"], "env": {"SEED": "7"}})
    WorkloadFactory(project=project, pool=node.pool, kind="notebook", name="lab", status="stopped", created_by=erin,
                    status_reason="StopRequested", spec={"env": {}, "ide": "vscode"})
    WorkloadFactory(project=project, pool=node.pool, kind="deployment", name="digits", status="stopped",
                    created_by=erin, status_reason="StopRequested", preemptible=False,
                    spec={"command": ["/bin/sh", "-c", "serve"], "env": {}, "port": 8080, "readiness_path": "/healthz",
                          "public": False, "autoscaling": {"min_replicas": 1, "max_replicas": 3}})


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("workflows")
    shared = tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)

    def flush():
        from django.core.management import call_command

        call_command("flush", interactive=False, verbosity=0, allow_cascade=True)

    with django_db_blocker.unblock():
        in_thread(lambda: _seed(str(shared)))
    running = None
    try:
        running = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp / "data"), CAIRN_MODE="embedded",
                                           CAIRN_TASKS_IN_PROCESS="1", CAIRN_SCHEDULER_INTERVAL="0.3",
                                           CAIRN_SWEEP_INTERVAL="0.3"),
                                 log=tmp / "server.log")
        yield running
    finally:
        if running is not None:
            running.stop()
        with django_db_blocker.unblock():
            in_thread(flush)


def _api(server) -> requests.Session:
    token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                          timeout=10).json()["token"]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def _signed_in(server, new_page):
    page = new_page(server.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    return page


def test_clone_run_again_and_a_stop_that_asks_first(server, new_page):
    page = _signed_in(server, new_page)
    broken = page.get_by_test_id("workload-row").filter(has_text="broken")
    expect(broken.get_by_test_id("reason-cell")).to_contain_text("exited with code 3", timeout=UI)
    broken.get_by_role("link", name="broken").click()

    # Clone: the form filled in from the failed job's spec, in any state.
    page.get_by_test_id("clone-workload").click()
    expect(page.get_by_test_id("cloned-from")).to_contain_text("broken", timeout=UI)
    expect(field(page, "Command")).to_have_value("python train.py --lr 0.1")
    expect(field(page, "CPUs")).to_have_value("1")
    expect(field(page, "Memory")).to_have_value("512Mi")
    expect(field(page, "Environment")).to_have_value("SEED=7")
    field(page, "Name").fill("broken-fixed")
    field(page, "Command").fill("python train.py --lr 0.01")
    page.get_by_test_id("submit-workload").click()
    expect(page.get_by_test_id("workload-name")).to_have_text("broken-fixed", timeout=UI)

    # Stop asks first; cancelling keeps it queued and gives the focus back to Stop.
    stop = page.get_by_test_id("stop-workload")
    stop.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("It leaves the queue", timeout=UI)
    dialog.get_by_test_id("stop-cancel").click()
    expect(dialog).to_have_count(0, timeout=UI)
    expect(stop).to_be_focused()
    expect(page.get_by_test_id("status-badge").first).to_contain_text("queued")
    stop.click()
    page.get_by_role("dialog").get_by_test_id("stop-confirm-button").click()
    expect(page.get_by_test_id("status-badge").first).to_contain_text("stopped", timeout=UI)

    # Run again: a new job linked to the failed one, which keeps its history.
    page.goto("/projects/dash/workloads")
    page.get_by_test_id("workloads-table").get_by_role("link", name="broken", exact=True).click()
    page.get_by_test_id("run-again").click()
    expect(page.get_by_test_id("workload-name")).to_have_text("broken-2", timeout=UI)
    expect(page.get_by_text(re.compile(r"Runs 'broken' \(#\d+\) again"))).to_be_visible(timeout=UI)
    page.get_by_test_id("resubmitted-from").get_by_role("link").click()  # back to the one it runs again
    expect(page.get_by_test_id("workload-name")).to_have_text("broken", timeout=UI)
    http = _api(server)
    rows = {w["name"]: w for w in http.get(f"{server.url}/api/v1/projects/dash/workloads/", timeout=10).json()["results"]}
    assert rows["broken"]["status"] == "failed" and rows["broken-2"]["spec"] == rows["broken"]["spec"]


def test_kind_pages_overview_and_deleting_a_project(server, new_page):
    http = _api(server)
    waiting = http.post(f"{server.url}/api/v1/projects/dash/training-jobs/",
                        json={"name": "hungry", "command": "true", "resources": {"cpu": 1, "memory": "256Mi"}}, timeout=10)
    assert waiting.status_code == 201, waiting.text
    page = _signed_in(server, new_page)

    page.get_by_test_id("kind-pages").get_by_role("link", name="Notebooks").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/notebooks$"), timeout=UI)
    expect(page.get_by_role("heading", level=1)).to_have_text("Notebooks")
    expect(page.get_by_test_id("workload-row")).to_have_count(1, timeout=UI)
    expect(page.get_by_test_id("ide-cell")).to_contain_text("VS Code")

    page.get_by_test_id("kind-pages").get_by_role("link", name="Deployments").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/deployments$"), timeout=UI)
    row = page.get_by_test_id("workload-row").filter(has_text="digits")
    expect(row.get_by_test_id("url-cell")).to_contain_text("/serve/dash/digits/", timeout=UI)
    expect(row.get_by_test_id("replicas-cell")).to_contain_text("autoscaled 1–3")

    page.get_by_test_id("overview-link").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/overview$"), timeout=UI)
    queued = page.get_by_test_id("overview-queued-item").filter(has_text="hungry")
    expect(queued).to_contain_text("Waiting for quota", timeout=30_000)  # once the scheduler has decided
    expect(queued).not_to_contain_text("nothing to borrow")
    expect(page.get_by_test_id("overview-failed-item").filter(has_text="broken")).to_contain_text("exit code 3")
    expect(page.get_by_test_id("overview-usage-row")).to_contain_text("local")
    expect(page.get_by_test_id("overview-budget")).to_contain_text("No GPU-hour budget")

    # An owner deletes a project (here one without work), after typing its slug.
    page.goto("/projects/scratch/overview")
    page.get_by_test_id("delete-project").click()
    confirm = page.get_by_test_id("delete-project-confirm")
    expect(confirm).to_be_disabled(timeout=UI)
    page.get_by_test_id("delete-project-slug").fill("scratch")
    confirm.click()
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    assert http.get(f"{server.url}/api/v1/projects/scratch/", timeout=10).status_code == 404


def _hex_to_rgb(colour: str) -> str:
    value = colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(value[i:i + 2], 16) for i in (0, 2, 4)))


def test_a_sweep_made_from_the_form_says_why_its_trial_waits_and_parcoords_keep_each_runs_colour(server, new_page):
    http = _api(server)
    token = http.headers["Authorization"].split()[1]
    for name, lr in (("fast", "0.3"), ("slow", "0.05")):
        done = subprocess.run([sys.executable, "-c", SDK_RUN, server.url, token, "dash", name, lr], timeout=120,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    runs = http.get(f"{server.url}/api/v1/projects/dash/runs/", params={"page_size": 100}, timeout=10).json()["results"]
    ids = sorted(r["id"] for r in runs if r["name"] in ("fast", "slow"))

    # The new-sweep form: what POST /sweeps/ takes, the API's messages next to their fields.
    page = _signed_in(server, new_page)
    page.goto("/projects/dash/sweeps")
    page.get_by_test_id("new-sweep").click()
    form = page.get_by_test_id("sweep-form")
    field(page, "Name").fill("waits")
    field(page, "Objective metric").fill("not a key!")
    field(page, "Search space").fill('{"lr": {"type": "float", "low": 0.01, "high": 0.1}}')
    field(page, "Max trials").fill("1")
    field(page, "Seed").fill("1")
    field(page, "Command").fill("true")
    field(page, "CPUs").fill("2")
    field(page, "Memory").fill("256Mi")
    page.get_by_test_id("create-sweep").click()
    expect(form).to_contain_text("is not a metric key", timeout=UI)
    expect(field(page, "Objective metric")).to_have_attribute("aria-invalid", "true")
    field(page, "Objective metric").fill("acc")
    page.get_by_test_id("create-sweep").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/sweeps/\d+$"), timeout=UI)

    # Its trial waits on quota (2 CPUs against the project's half): the page says so in words.
    wait = page.get_by_test_id("trial-wait")
    expect(wait).to_contain_text("Waiting for quota", timeout=30_000)
    expect(wait).not_to_contain_text("nothing to borrow")

    page.goto(f"/projects/dash/compare?runs={','.join(map(str, ids))}")
    chart = page.get_by_test_id("parallel-coordinates")
    expect(chart).to_have_attribute("data-lines", "2", timeout=UI)
    legend = page.get_by_test_id("parcoords-legend")
    expect(legend).to_have_attribute("data-colour-by", "run")
    expect(legend).to_contain_text("one per run, as on the curves")
    colours = {}
    for run in ids:
        line = chart.locator(f"g[data-run-id='{run}'] [data-testid=parcoords-line]")
        colour = line.get_attribute("data-colour")
        expect(legend.locator(f"[data-testid=parcoords-legend-item][data-run-id='{run}']")).to_have_attribute(
            "data-colour", colour)
        colours[run] = colour
    assert len(set(colours.values())) == 2, colours
    # The same colour as the run's swatch above the curves (the compare page's one colour per run).
    swatches = page.get_by_test_id("compare-runs-list").locator("[style*='border-radius']")
    shown = [swatches.nth(i).evaluate("e => getComputedStyle(e).backgroundColor") for i in range(swatches.count())]
    assert [_hex_to_rgb(colours[run]) for run in ids] == shown[:2], (colours, shown)
