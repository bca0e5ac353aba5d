"""The dashboard in a real browser (Debian's chromium through Playwright) against a live Cairn:
`manage.py run_embedded` on a free port, on the test PostgreSQL and Redis, running jobs as real
local processes that log metrics with the SDK.

One server per module (and per xdist worker that runs tests of it): its rows are created once,
and the database is flushed when the module is done, as a transactional test would.
"""
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread, spare_node
from tests.processes import EmbeddedServer, cairn_env

# django_db: so that pytest-django sets up the test database; the rows the server reads are
# committed by the module fixture (in its own connection) and flushed after the module.
pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(240)]

PASSWORD = "pw-for-tests-123"  # tests/factories.py
PROJECT, PROJECT_NAME = "dash", "Dashboard"
OTHER_PROJECT, OTHER_PROJECT_NAME = "other-team", "Other team"
UI = 15_000  # ms: a page, a request, a websocket frame (2 shared cores)
JOB = 60_000  # ms: a job's progress through the scheduler and the local backend

# The job of the submit test: 20 steps of loss, then it waits for the test to open the gate
# (so points and log lines provably arrive after the detail page loaded), then 20 more.
GATED_JOB = textwrap.dedent("""
    import sys, time, pathlib
    import cairn
    gate = pathlib.Path(sys.argv[1])
    cairn.init(system_metrics=False)
    cairn.log_params({"lr": 0.1, "optimizer": "sgd"})
    for step in range(40):
        if step == 20:
            print("waiting at the gate", flush=True)
            deadline = time.monotonic() + 120
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        loss = 2.0 / (1 + step)
        cairn.log({"loss": loss}, step=step)
        print(f"step {step} loss {loss:.4f}", flush=True)
        time.sleep(0.2)
    print("training done", flush=True)
    cairn.finish()
""")

# A standalone script logging one run with the SDK (as a researcher's laptop would).
SDK_RUN = textwrap.dedent("""
    import math, sys
    import cairn
    url, token, project, name, lr = sys.argv[1:6]
    cairn.init(url=url, project=project, token=token, name=name, system_metrics=False)
    cairn.log_params({"lr": float(lr), "optimizer": "adam", "batch_size": 64})
    for step in range(30):
        cairn.log({"loss": 2.0 * math.exp(-float(lr) * step) + 0.05}, step=step)
    sys.exit(0 if cairn.finish() else 1)
""")


@dataclass
class Cairn:
    url: str
    tmp: Path
    server: EmbeddedServer

    def token(self, username: str) -> str:
        """An API token for `username`, through the password login."""
        answer = requests.post(f"{self.url}/api/v1/auth/login/", json={"username": username, "password": PASSWORD},
                               timeout=10)
        assert answer.status_code in (200, 201), answer.text
        return answer.json()["token"]


def _redis_url_of_this_worker(env: dict[str, str]) -> dict[str, str]:
    """A Redis database of its own for this worker's server, so that the websocket groups of two
    servers (whose databases both count ids from 1) never mix."""
    url = env.get("REDIS_URL")
    if not url:
        return {}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = 8 + int(re.sub(r"\D", "", worker) or 0) % 8
    return {"REDIS_URL": re.sub(r"(/\d+)?$", f"/{index}", url, count=1)}


@pytest.fixture(scope="module")
def cairn(django_db_setup, django_db_blocker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard")
    data_dir = tmp / "cairn-data"
    data_dir.mkdir()
    shared = tmp / "shared"  # the pool allows it: sandboxed replicas read scripts and gates from it
    shared.mkdir()
    shared.chmod(0o777)

    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared)]
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug=PROJECT, name=PROJECT_NAME)
        MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
        other = ProjectFactory(slug=OTHER_PROJECT, name=OTHER_PROJECT_NAME)
        MembershipFactory(project=other, user=UserFactory(username="olga"), role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=8000, nominal_memory_mb=16384)

    def flush():
        from django.core.management import call_command

        call_command("flush", interactive=False, verbosity=0, allow_cascade=True)

    with django_db_blocker.unblock():
        in_thread(seed)
    env = cairn_env(CAIRN_DATA_DIR=str(data_dir), CAIRN_MODE="embedded", CAIRN_TASKS_IN_PROCESS="1",
                    CAIRN_SCHEDULER_INTERVAL="0.3", CAIRN_RECONCILER_INTERVAL="0.3")
    env.update(_redis_url_of_this_worker(env))
    server = None
    try:
        server = EmbeddedServer(env, log=tmp / "server.log")
        yield Cairn(url=server.url, tmp=tmp, server=server)
    finally:
        if server is not None:
            server.stop()
            print(f"server log: {tmp / 'server.log'}")
        with django_db_blocker.unblock():
            in_thread(flush)


def field(page, label: str):
    """The input labelled exactly `label` (a required field's label ends with an asterisk)."""
    return page.get_by_label(re.compile(rf"^{re.escape(label)}\s*\*?$"))


def sign_in(page, username: str, password: str = PASSWORD) -> None:
    page.goto("/signin")
    field(page, "Username").fill(username)
    field(page, "Password").fill(password)
    page.get_by_test_id("signin-submit").click()


def workloads_url(project: str = PROJECT) -> str:
    return f"/projects/{project}/workloads"


def test_sign_in_rejects_a_wrong_password_and_lands_on_the_projects_workloads(cairn, new_page):
    page = new_page(cairn.url)
    page.goto(workloads_url())
    expect(page).to_have_url(re.compile(r"/signin\?next="), timeout=UI)  # signed out: sent to sign in

    field(page, "Username").fill("erin")
    field(page, "Password").fill("not-her-password")
    page.get_by_test_id("signin-submit").click()
    expect(page.get_by_test_id("signin-error")).to_contain_text("Wrong username or password", timeout=UI)
    expect(page).to_have_url(re.compile(r"/signin"))

    field(page, "Password").fill(PASSWORD)
    page.get_by_test_id("signin-submit").click()
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    expect(page.get_by_test_id("signin-error")).to_have_count(0)
    expect(page.get_by_test_id("project-switcher")).to_have_value(re.compile(PROJECT_NAME))
    expect(page.get_by_test_id("live-indicator")).to_have_attribute("data-status", "open", timeout=UI)

    # a fresh visit of the root goes to the (only) project, the session being kept
    page.goto("/")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)


def test_submitted_job_goes_live_in_the_list_and_its_detail_page_draws_new_points_and_logs(cairn, new_page):
    script = cairn.tmp / "shared" / "gated_job.py"
    script.write_text(GATED_JOB)
    gate = cairn.tmp / "shared" / "gate-open"

    listing = new_page(cairn.url)
    sign_in(listing, "erin")
    expect(listing).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    expect(listing.get_by_test_id("live-indicator")).to_have_attribute("data-status", "open", timeout=UI)
    listing.evaluate("window.__notReloaded = true")

    form = listing.context.new_page()
    form.goto(f"/projects/{PROJECT}/workloads/new?kind=training")
    field(form, "Name").fill("Not A Valid Name")
    field(form, "Command").fill(f"python {script} {gate}")
    field(form, "GPUs").fill("0")
    field(form, "Replicas").fill("1")
    # a run-time limit without a unit is refused in the browser, before anything is sent
    field(form, "Max run time").fill("120")
    form.get_by_test_id("submit-workload").click()
    expect(field(form, "Max run time")).to_have_attribute("aria-invalid", "true", timeout=UI)
    expect(form.get_by_test_id("submit-form")).to_contain_text("“120” has no unit: write 120s, 120m or 120h.")
    expect(field(form, "Name")).not_to_have_attribute("aria-invalid", "true")
    field(form, "Max run time").fill("2h")
    expect(form.get_by_test_id("submit-form")).to_contain_text("Stopped, and failed, after 2 h of running.")
    form.get_by_test_id("submit-workload").click()
    # refused by the API: the error is on the field, the form stays
    expect(field(form, "Name")).to_have_attribute("aria-invalid", "true", timeout=UI)
    expect(field(form, "Max run time")).not_to_have_attribute("aria-invalid", "true")
    expect(form).to_have_url(re.compile(r"/workloads/new"))

    field(form, "Name").fill("gated-loss")
    form.get_by_test_id("submit-workload").click()
    expect(form).to_have_url(re.compile(rf"/projects/{PROJECT}/workloads/training/\d+$"), timeout=UI)
    job_id = int(form.url.rstrip("/").rsplit("/", 1)[1])

    # the list, never reloaded, shows the new job and its status going to running
    row = listing.locator(f"[data-testid=workload-row][data-workload-id='{job_id}']")
    expect(row).to_contain_text("gated-loss", timeout=UI)
    expect(row.get_by_test_id("status-badge")).to_have_attribute("data-status", "running", timeout=JOB)

    # its detail page, opened while the job waits at the gate with 20 points and 20 lines written
    detail = listing.context.new_page()
    asked: list[str] = []
    detail.on("request", lambda request: asked.append(urlsplit(request.url).path))
    detail.goto(form.url)
    log = detail.get_by_test_id("log-view")
    expect(log).to_contain_text("waiting at the gate", timeout=JOB)
    expect(log).to_contain_text("step 19")
    expect(log).not_to_contain_text("step 20")
    chart = detail.get_by_test_id("metrics-chart")
    expect(chart).to_have_attribute("data-point-count", re.compile(r"^[1-9]\d*$"), timeout=UI)
    expect(detail.get_by_test_id("status-timeline")).to_be_visible()
    expect(detail.get_by_test_id("status-timeline")).to_have_attribute("data-status", "running")
    expect(detail.get_by_test_id("gpu-panels")).to_be_visible()
    expect(detail.get_by_test_id("events-table")).to_contain_text("Submitted")
    expect(detail.get_by_test_id("stop-workload")).to_be_enabled()
    # the page reads the workload through the kind-independent routes, not the kind's collection
    here = f"/api/v1/projects/{PROJECT}/workloads/{job_id}/"
    assert here in asked and f"{here}events/" in asked, asked
    assert not [p for p in asked if "/training-jobs/" in p], asked
    expect(detail.get_by_role("link", name="Full log")).to_have_attribute("href", re.compile(rf"^{here}logs/\?"))
    # the 2 h limit from the form, and, running, its deadline and what is left of it
    expect(detail.get_by_test_id("runtime-limit")).to_have_text("2 h")
    expect(detail.get_by_test_id("runtime-deadline")).to_have_text(re.compile(r"^until .+ · (1h 5\dm|2h 0m) left$"))  # of 2 h, just started
    loaded_points = int(chart.get_attribute("data-point-count"))
    assert loaded_points <= 20, loaded_points  # nothing past the gate has been logged yet

    gate.write_text("open")
    # points and lines written after the page loaded arrive over the websocket and are drawn
    expect(log).to_contain_text("step 39", timeout=JOB)
    expect(log).to_contain_text("training done", timeout=UI)
    expect(chart).to_have_attribute("data-point-count", re.compile(r"^\d+$"))
    _expect_at_least(chart, "data-point-count", loaded_points + 1, timeout=UI)

    expect(row.get_by_test_id("status-badge")).to_have_attribute("data-status", "succeeded", timeout=JOB)
    assert listing.evaluate("window.__notReloaded === true"), "the list was reloaded"
    expect(detail.get_by_test_id("stop-workload")).to_have_count(0, timeout=UI)
    expect(detail.get_by_test_id("runtime-limit")).to_have_text("2 h")
    expect(detail.get_by_test_id("runtime-deadline")).to_have_count(0)  # over: no deadline any more
    expect(detail.get_by_test_id("status-explanation")).to_have_count(0)
    answer = requests.get(f"{cairn.url}/api/v1/projects/{PROJECT}/training-jobs/{job_id}/",
                          headers={"Authorization": f"Bearer {cairn.token('erin')}"}, timeout=10)
    assert answer.json()["max_runtime_seconds"] == 7200, answer.text


def _expect_at_least(locator, attribute: str, minimum: int, timeout: int) -> None:
    """Waits (polling, like expect) until the integer attribute reaches `minimum`."""
    deadline = time.monotonic() + timeout / 1000
    value = None
    while time.monotonic() < deadline:
        value = locator.get_attribute(attribute)
        if value is not None and value.isdigit() and int(value) >= minimum:
            return
        locator.page.wait_for_timeout(200)
    raise AssertionError(f"{attribute} stayed at {value!r}, expected at least {minimum}")


def test_comparing_two_runs_highlights_the_differing_param_and_overlays_their_curves(cairn, new_page):
    token = cairn.token("erin")
    logs = [subprocess.Popen([sys.executable, "-c", SDK_RUN, cairn.url, token, PROJECT, f"sweep-lr-{lr}", lr],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for lr in ("0.1", "0.3")]
    for sdk in logs:
        output, _ = sdk.communicate(timeout=60)
        assert sdk.returncode == 0, output

    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    page.goto(f"/projects/{PROJECT}/runs")
    expect(page.get_by_test_id("runs-table")).to_be_visible(timeout=UI)
    ids = []
    for name in ("sweep-lr-0.1", "sweep-lr-0.3"):
        row = page.get_by_test_id("run-row").filter(has_text=name)
        expect(row).to_have_count(1, timeout=UI)
        row.get_by_role("checkbox").check()
        ids.append(row.get_attribute("data-run-id"))
    page.get_by_test_id("compare-runs").click()

    expect(page).to_have_url(re.compile(rf"/projects/{PROJECT}/compare\?runs="), timeout=UI)
    assert sorted(re.search(r"runs=([\d,%C]+)", page.url).group(1).replace("%2C", ",").split(",")) == sorted(ids)
    params = page.get_by_test_id("params-table")
    expect(params).to_be_visible(timeout=UI)
    differing = params.locator("[data-differs=true]")
    expect(differing).to_have_count(1)
    expect(differing).to_contain_text("lr")
    expect(params.locator("tr", has_text="optimizer")).not_to_have_attribute("data-differs", "true")
    expect(page.get_by_test_id("compare-chart")).to_be_visible()
    expect(page.get_by_test_id("parallel-coordinates")).to_be_visible()


def test_an_outsider_cannot_see_the_project(cairn, new_page):
    page = new_page(cairn.url)
    sign_in(page, "olga")
    expect(page).to_have_url(re.compile(rf"{workloads_url(OTHER_PROJECT)}$"), timeout=UI)

    switcher = page.get_by_test_id("project-switcher")
    # the switcher's options come with the project list: opened before it is read, it stays empty
    expect(switcher).to_have_value(re.compile(OTHER_PROJECT_NAME), timeout=UI)
    expect(page.get_by_role("navigation", name="Work by kind")).to_be_visible(timeout=UI)
    switcher.click()
    expect(page.get_by_role("option", name=re.compile(OTHER_PROJECT_NAME))).to_be_visible(timeout=UI)
    expect(page.get_by_role("option", name=re.compile(PROJECT_NAME))).to_have_count(0)
    page.keyboard.press("Escape")

    page.goto(workloads_url())
    empty = page.get_by_test_id("empty-state")
    expect(empty).to_contain_text("Project not found", timeout=UI)
    expect(page.get_by_test_id("workloads-table")).to_have_count(0)
    # with her session cookie, the API says the project does not exist (never 403)
    for path in (f"/api/v1/projects/{PROJECT}/workloads/", f"/api/v1/projects/{PROJECT}/runs/"):
        assert page.request.get(path).status == 404, path
    assert page.request.get(f"/api/v1/projects/{OTHER_PROJECT}/workloads/").status == 200


def test_a_new_token_secret_is_shown_once_and_works(cairn, new_page):
    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    page.goto("/tokens")
    field(page, "Name").fill("laptop")
    page.get_by_role("button", name=re.compile("create", re.I)).click()
    secret = page.get_by_test_id("token-secret")
    expect(secret).to_contain_text(re.compile(r"cairn_\S+"), timeout=UI)
    value = re.search(r"cairn_\S+", secret.inner_text()).group(0)
    me = requests.get(f"{cairn.url}/api/v1/me/", headers={"Authorization": f"Bearer {value}"}, timeout=10)
    assert me.status_code == 200 and me.json()["username"] == "erin", me.text

    page.reload()
    expect(page.get_by_text("laptop").first).to_be_visible(timeout=UI)
    expect(page.get_by_test_id("token-secret")).to_have_count(0)
    assert value not in page.content()


def test_the_queue_says_what_work_waits_on_and_filters_by_it(cairn, new_page):
    headers = {"Authorization": f"Bearer {cairn.token('erin')}"}
    jobs = f"{cairn.url}/api/v1/projects/{PROJECT}/training-jobs/"
    # 64 GPUs against a nominal of 8, and no other project lends: it waits on quota whatever
    # GPUs this machine has (a cordoned 64-GPU spare makes it work the pool could run).
    in_thread(lambda: spare_node(add=True, name="spare-64gpu", gpus=64))
    created = requests.post(jobs, json={"name": "too-big", "command": "true", "resources": {"gpu": 64}},
                            headers=headers, timeout=10)
    assert created.status_code == 201, created.text
    job = created.json()["id"]
    try:
        page = new_page(cairn.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
        page.goto("/cluster")
        row = page.get_by_test_id("queue-row").filter(has_text="too-big")
        expect(row.get_by_test_id("waiting-on")).to_have_text("nothing to borrow", timeout=JOB)

        page.get_by_test_id("queue-waiting-on").click()
        page.get_by_role("option", name="budget", exact=True).click()
        expect(page).to_have_url(re.compile(r"[?&]waiting_on=budget"), timeout=UI)
        expect(page.get_by_test_id("queue-empty")).to_contain_text("Nothing in local is waiting on budget", timeout=UI)
        expect(page.get_by_test_id("queue-row")).to_have_count(0)
        page.goto("/cluster?waiting_on=quota_lendable")  # the filter is kept in the URL
        expect(row.get_by_test_id("waiting-on")).to_have_text("nothing to borrow", timeout=UI)

        page.goto(f"/projects/{PROJECT}/workloads/training/{job}")
        expect(page.get_by_test_id("pending-reason")).to_contain_text("quota:", timeout=UI)
        expect(page.get_by_test_id("waiting-on-hint")).to_contain_text("too little unused quota left to lend")

        page.goto(f"/projects/{PROJECT}/quotas")  # the quota page sums queued GPUs by what they wait on
        queued = page.get_by_test_id("quota-row").filter(has_text="local").get_by_test_id("quota-queued")
        expect(queued).to_contain_text("64 GPUs", timeout=UI)
        expect(queued).to_contain_text("nothing to borrow (GPUs): 64 GPUs")
    finally:
        stopped = requests.post(f"{jobs}{job}/stop/", headers=headers, timeout=10)
        in_thread(lambda: spare_node(add=False, name="spare-64gpu"))
        assert stopped.status_code in (200, 202), stopped.text


def test_cluster_and_quota_pages_show_the_local_pool_and_the_theme_switches(cairn, new_page):
    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)

    page.goto("/cluster")
    expect(page.get_by_test_id("cluster-pools")).to_contain_text("local", timeout=UI)
    expect(page.get_by_test_id("gpu-heatmap")).to_be_attached()
    expect(page.get_by_test_id("queue-table")).to_be_attached()
    # This machine's architecture (docs/accelerators.md), on its node and its pool.
    expect(page.get_by_test_id("node-kind").first).to_have_text(re.compile(r"· (amd64|arm64)$"), timeout=UI)
    expect(page.get_by_test_id("pool-kinds").first).to_contain_text(re.compile(r"amd64|arm64"))

    page.goto(f"/projects/{PROJECT}/quotas")
    expect(page.get_by_test_id("quotas-table")).to_contain_text("local", timeout=UI)
    expect(page.get_by_test_id("quota-pool-kinds").first).to_contain_text(re.compile(r"amd64|arm64"))

    html = page.locator("html")
    before = html.get_attribute("data-mantine-color-scheme")
    page.get_by_test_id("theme-toggle").click()
    expect(html).not_to_have_attribute("data-mantine-color-scheme", before or "")
    page.reload()  # the choice is kept
    expect(html).not_to_have_attribute("data-mantine-color-scheme", before or "", timeout=UI)


SERVING_APP = textwrap.dedent("""
    import os
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = os.environ["CAIRN_REPLICA"].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
""")


def test_a_deployments_page_draws_its_request_metrics_live(cairn, new_page):
    script = cairn.tmp / "shared" / "serving_app.py"
    script.write_text(SERVING_APP)
    headers = {"Authorization": f"Bearer {cairn.token('erin')}"}
    created = requests.post(f"{cairn.url}/api/v1/projects/{PROJECT}/deployments/", headers=headers, timeout=10,
                            json={"name": "echo", "command": ["python", str(script)], "replicas": 2})
    assert created.status_code == 201, created.text
    deployment_id = created.json()["id"]
    gateway = f"{cairn.url}/serve/{PROJECT}/echo/"
    deadline = time.monotonic() + JOB / 1000
    while requests.get(gateway, headers=headers, timeout=10).status_code != 200:
        assert time.monotonic() < deadline, "the deployment never answered through the gateway"
        time.sleep(0.3)

    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    page.goto(f"/projects/{PROJECT}/workloads/deployment/{deployment_id}")
    panel = page.get_by_test_id("serving-panel")
    expect(panel).to_be_visible(timeout=UI)
    with requests.Session() as session:
        for _ in range(30):
            assert session.get(gateway, headers=headers, timeout=10).status_code == 200
    charts = page.get_by_test_id("serving-chart")
    expect(charts.first).to_have_attribute("data-point-count", re.compile(r"^[1-9]\d*$"), timeout=UI)
    expect(panel).to_contain_text("Requests per second")
    expect(panel).to_contain_text("Latency")
    first = int(charts.first.get_attribute("data-point-count"))
    with requests.Session() as session:  # more traffic: more points arrive without a reload
        for _ in range(30):
            assert session.get(gateway, headers=headers, timeout=10).status_code == 200
    _expect_at_least(charts.first, "data-point-count", first + 1, timeout=UI)

    # A canary revision shows in the revision history; Roll back in the page withdraws it.
    revision = requests.post(f"{cairn.url}/api/v1/projects/{PROJECT}/deployments/{deployment_id}/revisions/",
                             headers=headers, timeout=10,
                             json={"env": {"VERSION": "2"}, "strategy": "canary", "canary_weight": 20})
    assert revision.status_code == 201, revision.text
    history = page.get_by_test_id("revisions-panel")
    expect(history.get_by_test_id("revision-row")).to_have_count(2, timeout=UI)
    expect(history.get_by_test_id("rollout-state")).to_contain_text("canary: revision 2 gets 20%", timeout=UI)
    history.get_by_test_id("rollout-rollback").click()
    expect(history.get_by_test_id("rollout-state")).to_contain_text("revision 1", timeout=UI)
    expect(history.get_by_test_id("rollout-state")).not_to_contain_text("canary")
