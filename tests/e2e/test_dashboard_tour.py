"""What a new user meets on the five-minute tour (issue 29, items 3, 11 and 12), in Debian's
chromium at 1366x768 against a live `manage.py run_embedded` (the `cairn` fixture of
test_dashboard.py: one server for this module, on the test PostgreSQL and Redis).

- quotas and the cluster count CPU and memory, not only GPUs, and the local node is sampled;
- the comparison page's parallel-coordinates chart keeps its metric axis inside the page;
- the admin's quota list shows its column titles whole.
"""
import re
import socket
import subprocess
import sys

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e import test_dashboard as dashboard
from tests.e2e.conftest import VIEWPORT, in_thread, spare_node
from tests.e2e.test_dashboard import PASSWORD, PROJECT, UI, sign_in, workloads_url
from tests.processes import wait_for

cairn = dashboard.cairn  # the module's server: `manage.py run_embedded`, seeded as test_dashboard.py's

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(240)]

JOB = 60_000  # ms: a job's way through the scheduler


def _api(cairn, user: str = "erin") -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {cairn.token(user)}"
    return session


def test_the_local_node_is_sampled_in_embedded_mode(cairn):
    """run_embedded samples this machine: the node's telemetry has CPU and memory within one
    pass (before, nothing sampled it, and the cluster page showed "—")."""
    api = _api(cairn)
    node = socket.gethostname()
    url = f"{cairn.url}/api/v1/telemetry/nodes/{node}/"

    def sampled() -> bool:
        metrics = set(api.get(url, timeout=10).json()["metrics"])
        return {"node.cpu_percent", "node.memory_percent"} <= metrics

    wait_for(sampled, timeout=30, message=f"CPU and memory telemetry of {node}")
    series = api.get(url, params={"metric": "node.memory_percent"}, timeout=10).json()["series"]
    assert series and 0 < series[0]["points"][-1][1] <= 100


def test_quota_and_cluster_pages_show_cpu_and_memory_and_what_waits_on_cpu(cairn, new_page):
    api = _api(cairn)
    jobs = f"{cairn.url}/api/v1/projects/{PROJECT}/training-jobs/"
    in_thread(lambda: spare_node(add=True, name="spare-32"))  # so the 16-CPU job can wait on quota
    # 16 cores against the project's 8 (tests/e2e/test_dashboard.py), no GPU: it waits on CPU.
    created = api.post(jobs, json={"name": "cpu-hungry", "command": "true", "resources": {"gpu": 0, "cpu": 16}},
                       timeout=10)
    assert created.status_code == 201, created.text
    job = created.json()["id"]
    try:
        wait_for(lambda: api.get(f"{jobs}{job}/", timeout=10).json()["waiting_on"], timeout=JOB / 1000,
                 message="the scheduler's decision")
        page = new_page(cairn.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)

        page.goto(f"/projects/{PROJECT}/quotas")
        row = page.get_by_test_id("quota-row").filter(has_text="local")
        expect(row).to_contain_text("8 CPUs", timeout=UI)  # the nominal
        expect(row.get_by_test_id("quota-cpu")).to_contain_text("of 8 CPUs")
        expect(row.get_by_test_id("quota-memory")).to_contain_text("memory")
        queued = row.get_by_test_id("quota-queued")
        expect(queued).to_contain_text("16 CPUs")
        expect(queued).not_to_have_text("nothing")
        wait = queued.get_by_test_id("quota-wait")
        expect(wait).to_contain_text("(CPU): 16 CPUs")
        expect(wait).to_contain_text("1 workload")

        page.goto("/cluster")
        pool = page.get_by_test_id("pool-card").filter(has_text="local")
        expect(pool.get_by_test_id("pool-cpu")).to_contain_text("cores", timeout=UI)
        expect(pool.get_by_test_id("pool-memory")).to_contain_text("GiB")
        node = page.get_by_test_id("node-row").filter(has_text=socket.gethostname())
        expect(node.get_by_test_id("node-cpu")).to_contain_text(re.compile(r"^\d+% busy"), timeout=JOB)
        expect(node.get_by_test_id("node-memory")).to_contain_text(re.compile(r"^\d+% used"))
        queue = page.get_by_test_id("queue-row").filter(has_text="cpu-hungry")
        expect(queue.get_by_test_id("queue-resources")).to_be_visible(timeout=UI)
        expect(queue).to_contain_text("16 CPU")
    finally:
        stopped = api.post(f"{jobs}{job}/stop/", timeout=10)
        in_thread(lambda: spare_node(add=False, name="spare-32"))
        assert stopped.status_code in (200, 202), stopped.text


# Two runs as examples/train.py logs them: the metric the tour compares is "weight_error".
TRAIN_LIKE = """
import sys
import cairn
url, token, project, name, lr = sys.argv[1:6]
cairn.init(url=url, project=project, token=token, name=name, system_metrics=False)
cairn.log_params({"lr": float(lr), "steps": 20})
for step in range(20):
    cairn.log({"loss": 1.0 / (1 + float(lr) * step), "weight_error": 2.0 / (1 + step)}, step=step)
sys.exit(0 if cairn.finish() else 1)
"""


def test_parallel_coordinates_keep_the_metric_axis_inside_the_page_at_1366(cairn, new_page):
    token = cairn.token("erin")
    # the third run repeats the first exactly: on the chart it would hide under it
    for name, lr in (("axis-lr-0.2", "0.2"), ("axis-lr-0.4", "0.4"), ("axis-lr-0.2-again", "0.2")):
        done = subprocess.run([sys.executable, "-c", TRAIN_LIKE, cairn.url, token, PROJECT, name, lr],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    runs = _api(cairn).get(f"{cairn.url}/api/v1/projects/{PROJECT}/runs/", params={"page_size": 100}, timeout=10)
    ids = [r["id"] for r in runs.json()["results"] if r["name"].startswith("axis-lr-")]
    assert len(ids) == 3

    page = new_page(cairn.url)
    assert page.viewport_size == VIEWPORT
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    page.goto(f"/projects/{PROJECT}/compare?runs={','.join(map(str, ids))}")
    chart = page.get_by_test_id("parallel-coordinates")
    expect(chart).to_have_attribute("data-lines", "3", timeout=UI)
    expect(page.get_by_test_id("identical-runs")).to_have_text(re.compile(
        r"^axis-lr-0\.2(-again)? has exactly the same points as axis-lr-0\.2(-again)?: drawn dashed"), timeout=UI)
    # the chart's x axis is titled (uPlot draws it on the canvas; the container names it)
    expect(page.get_by_test_id("compare-chart")).to_have_attribute("data-x-label", "step", timeout=UI)
    page.get_by_test_id("parcoords-metric").click()
    page.get_by_role("option", name="weight_error", exact=True).click()
    metric_axis = chart.locator("[data-axis-source=metric]")
    expect(metric_axis).to_have_count(1)
    expect(metric_axis).to_contain_text("weight_error", timeout=UI)
    page.wait_for_timeout(300)  # the chart follows its container's size
    axis = metric_axis.bounding_box()
    box = chart.bounding_box()
    assert axis is not None and box is not None
    assert axis["x"] >= box["x"] and axis["x"] + axis["width"] <= box["x"] + box["width"] + 0.5, (axis, box)
    assert axis["x"] + axis["width"] <= VIEWPORT["width"], (axis, VIEWPORT)
    # and nothing of the page hangs off its right edge
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_admin_quota_list_shows_its_column_titles_whole_at_1366(cairn, new_page, django_db_blocker):
    def staff():
        from django.contrib.auth.hashers import PBKDF2PasswordHasher

        from apps.accounts.models import User
        from tests.factories import UserFactory

        UserFactory(username="ada", is_staff=True, is_superuser=True)
        # the server checks passwords with the production hasher, not the tests' fast one
        hasher = PBKDF2PasswordHasher()
        User.objects.filter(username="ada").update(password=hasher.encode(PASSWORD, hasher.salt()))

    with django_db_blocker.unblock():
        in_thread(staff)
    page = new_page(cairn.url)
    page.goto("/admin/login/?next=/admin/quotas/quota/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(re.compile(r"/admin/quotas/quota/$"), timeout=UI)
    table = page.locator("#result_list")
    expect(table).to_be_visible(timeout=UI)
    headers = table.locator("thead th")
    titles = [t.strip() for t in headers.all_inner_texts() if t.strip()]
    assert any("BUDGET" in t.upper() for t in titles), titles
    cut = page.evaluate("""() => [...document.querySelectorAll('#result_list thead th')]
        .map((th) => {
            const box = th.getBoundingClientRect();
            const inner = th.querySelector('.text') || th;
            return {text: th.innerText.trim(), right: box.right, scroll: inner.scrollWidth, client: inner.clientWidth};
        })
        .filter((h) => h.text && (h.scroll > h.client + 1 || h.right > window.innerWidth))""")
    assert cut == [], cut
    # the list itself fits: nothing to scroll sideways to read a column
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_a_running_jobs_page_agrees_with_itself_and_its_stopped_run_says_stopped(cairn, new_page):
    """Items 11 and 8: one clock for "Running for" and the timeline, the status line said once,
    events oldest first (as the API), the Queued condition's message no longer the stale wait;
    and the run of a stopped job says "stopped"."""
    api = _api(cairn)
    jobs = f"{cairn.url}/api/v1/projects/{PROJECT}/training-jobs/"
    created = api.post(jobs, json={"name": "two-sleepers", "command": "python -c 'import time; time.sleep(120)'",
                                   "replicas": 2, "resources": {"gpu": 0, "cpu": 1, "memory": "256Mi"}}, timeout=10)
    assert created.status_code == 201, created.text
    job = created.json()["id"]
    try:
        wait_for(lambda: api.get(f"{jobs}{job}/", timeout=10).json()["status"] == "running", timeout=JOB / 1000,
                 message="the job to run")
        page = new_page(cairn.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
        page.goto(f"/projects/{PROJECT}/workloads/training/{job}")
        expect(page.get_by_test_id("status-line")).to_have_text(re.compile(r"^Started 2 replica\(s\)"), timeout=UI)
        running = page.get_by_test_id("timeline-segment").and_(page.locator("[data-status=running]"))
        expect(running).to_contain_text("running · ", timeout=UI)
        for _ in range(3):  # both read the page's one clock: the same duration, whenever read
            header, label = page.evaluate("""() => [
                document.querySelector('[data-testid=running-for]').textContent,
                document.querySelector('[data-testid=timeline-segment][data-status=running]').textContent]""")
            assert label == f"running · {header}", (header, label)
            page.wait_for_timeout(1500)
        reasons = page.get_by_test_id("event-row").evaluate_all("rows => rows.map(r => r.dataset.reason)")
        api_reasons = [e["reason"] for e in api.get(f"{jobs}{job}/events/", timeout=10).json()["results"]]
        # the Events panel lists newest first; the API oldest first
        assert reasons == api_reasons[::-1] and reasons[-1] == "Submitted", (reasons, api_reasons)
        queued = page.get_by_test_id("condition-row").and_(page.locator("[data-type=Queued]"))
        expect(queued).to_contain_text("False")
        expect(queued).not_to_contain_text("Waiting for the scheduler.")
    finally:
        stopped = api.post(f"{jobs}{job}/stop/", timeout=10)
        assert stopped.status_code in (200, 202), stopped.text
    wait_for(lambda: api.get(f"{jobs}{job}/", timeout=10).json()["status"] == "stopped", timeout=JOB / 1000,
             message="the job to stop")
    runs = api.get(f"{cairn.url}/api/v1/projects/{PROJECT}/runs/", params={"workload": job}, timeout=10).json()
    assert [r["status"] for r in runs["results"]] == ["stopped"]
