"""Accessibility of the dashboard (issue 46, items 16-18 and the WCAG 2.2 AA part of "Deliver"), in
Debian's chromium through Playwright against a live Cairn (`manage.py run_embedded` on the test
PostgreSQL and Redis, one server for this module):

- axe-core (pinned in frontend/package.json, injected from frontend/node_modules: no network)
  finds no critical or serious violation on any page of the dashboard, in the light and the dark
  theme: sign-in, every page the navigation links to, the submit form of each kind, the pages of a
  finished job, a queued job, a notebook and a serving deployment, a run comparison, a sweep, and
  the page-not-found page;
- at 390 px the collapsed navigation takes no Tab stop until the menu button opens it;
- the keyboard alone signs in, submits a job, opens it and stops it through a confirmation dialog
  that gives focus back.

The module's server runs a small sweep of two real trials (runs, metrics, logs) and a deployment
that serves, so that the charts, logs and tables axe looks at hold data.
"""
import json
import re
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e import test_dashboard as dashboard
from tests.e2e.conftest import in_thread, spare_node
from tests.e2e.test_dashboard import PASSWORD, PROJECT, sign_in, workloads_url
from tests.processes import EmbeddedServer, cairn_env, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(420)]

UI = 15_000
AXE = Path(__file__).resolve().parents[2] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("critical", "serious")

TRIAL = textwrap.dedent("""
    import json, os
    import cairn
    params = json.loads(os.environ["CAIRN_SWEEP_PARAMS"])
    cairn.init(system_metrics=False)
    cairn.log_params({"note": "a11y"})
    for epoch in range(1, 6):
        cairn.log({"acc": params["quality"] * epoch / 5, "loss": 1 - params["quality"] * epoch / 5}, step=epoch)
        print(f"epoch {epoch} acc {params['quality'] * epoch / 5:.3f}", flush=True)
    assert cairn.finish(timeout=60)
""")

SERVING_APP = dashboard.SERVING_APP


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, tmp_path_factory):
    """A live Cairn with something on every page: a finished sweep (its trials are jobs with runs,
    metrics and logs), a queued job, a stopped notebook, a serving deployment, a volume and a
    dataset, GPU nodes on the cluster page and a GPU-hour budget on the quota page."""
    tmp = tmp_path_factory.mktemp("a11y")
    shared = tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "trial.py").write_text(TRIAL)
    (shared / "serving_app.py").write_text(SERVING_APP)
    corpus = shared / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a" * 100)

    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory, WorkloadFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared)]
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug=PROJECT, name="Dashboard")
        erin = UserFactory(username="erin")
        MembershipFactory(project=project, user=erin, role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_gpu_milli=2000, nominal_cpu_milli=8000,
                     nominal_memory_mb=16384, gpu_hour_budget=100)
        WorkloadFactory(project=project, pool=node.pool, kind="notebook", name="scratchpad", status="stopped",
                        created_by=erin, spec={"env": {}, "ide": "jupyterlab"})
        spare_node(add=True, name="gpu-spare", gpus=4)
        return node.pool.name

    def flush():
        from django.core.management import call_command

        call_command("flush", interactive=False, verbosity=0, allow_cascade=True)

    with django_db_blocker.unblock():
        pool = in_thread(seed)
    env = cairn_env(CAIRN_DATA_DIR=str(tmp / "data"), CAIRN_MODE="embedded", CAIRN_TASKS_IN_PROCESS="1",
                    CAIRN_SCHEDULER_INTERVAL="0.3", CAIRN_RECONCILER_INTERVAL="0.3", CAIRN_SWEEP_INTERVAL="0.3")
    env.update(dashboard._redis_url_of_this_worker(env))
    server = None
    try:
        server = EmbeddedServer(env, log=tmp / "server.log")
        site = _populate(server.url, shared, corpus, pool)
        site["shared"] = shared
        yield site
    finally:
        if server is not None:
            server.stop()
            print(f"server log: {tmp / 'server.log'}")
        with django_db_blocker.unblock():
            in_thread(flush)


def _populate(url: str, shared: Path, corpus: Path, pool: str) -> dict:
    token = requests.post(f"{url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                          timeout=10).json()["token"]
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token}"
    api = f"{url}/api/v1/projects/{PROJECT}"
    sweep = http.post(f"{api}/sweeps/", json={
        "name": "quality-search", "objective": {"metric": "acc"}, "algorithm": "random", "seed": 3,
        "space": {"quality": {"type": "float", "low": 0.1, "high": 0.9},
                  "solver": {"type": "categorical", "choices": ["adam", "sgd"]}},
        "budget": {"max_trials": 2}, "max_concurrent": 2,
        "template": {"command": f"python {shared / 'trial.py'}", "resources": {"cpu": 0.5, "memory": "256Mi"}},
    }, timeout=10)
    assert sweep.status_code == 201, sweep.text
    sweep = sweep.json()["id"]
    assert http.post(f"{api}/volumes/", json={"name": "images", "size_gb": 3}, timeout=10).status_code == 201
    dataset = http.post(f"{api}/datasets/", json={"name": "corpus", "source": "host_path", "pool": pool,
                                                  "location": {"path": str(corpus)}}, timeout=30)
    assert dataset.status_code == 201, dataset.text
    # 8 GPUs against a nominal of 2: it waits (the cordoned 4-GPU spare is in the pool)
    queued = http.post(f"{api}/training-jobs/", json={"name": "waits-for-gpus", "command": "true",
                                                      "resources": {"gpu": 4, "cpu": 0.5}}, timeout=10)
    assert queued.status_code == 201, queued.text
    deployment = http.post(f"{api}/deployments/", json={
        "name": "echo", "command": ["python", str(shared / "serving_app.py")], "replicas": 1,
        "resources": {"cpu": 0.5, "memory": "256Mi"}}, timeout=10)
    assert deployment.status_code == 201, deployment.text
    wait_for(lambda: http.get(f"{api}/sweeps/{sweep}/", timeout=10).json()["status"] == "completed", timeout=180,
             interval=0.5, message="the sweep to complete")
    trials = http.get(f"{api}/sweeps/{sweep}/trials/", timeout=10).json()["results"]
    gateway = f"{url}/serve/{PROJECT}/echo/"
    wait_for(lambda: http.get(gateway, timeout=10).status_code == 200, timeout=90, interval=0.3,
             message="the deployment to answer")
    for _ in range(10):
        http.get(gateway, timeout=10)
    return {
        "url": url, "token": token, "sweep": sweep, "runs": sorted(t["run"] for t in trials),
        "job": trials[0]["workload"]["id"], "queued": queued.json()["id"], "deployment": deployment.json()["id"],
    }


def _pages(site: dict) -> list[str]:
    """Every page: those the navigation links to (so a page added later is checked too), and the
    ones reached from them."""
    p = f"/projects/{PROJECT}"
    return [
        f"{p}/overview", f"{p}/notebooks", f"{p}/deployments", f"{p}/sweeps/new",
        f"{p}/workloads/new?kind=training", f"{p}/workloads/new?kind=notebook", f"{p}/workloads/new?kind=deployment",
        f"{p}/workloads/training/{site['job']}", f"{p}/workloads/training/{site['queued']}",
        f"{p}/workloads/notebook/{_notebook(site)}", f"{p}/workloads/deployment/{site['deployment']}",
        f"{p}/compare?runs={','.join(map(str, site['runs']))}", f"{p}/sweeps/{site['sweep']}",
        f"{p}/no-such-page",
    ]


def _notebook(site: dict) -> int:
    answer = requests.get(f"{site['url']}/api/v1/projects/{PROJECT}/notebooks/",
                          headers={"Authorization": f"Bearer {site['token']}"}, timeout=10).json()
    return answer["results"][0]["id"]


def _settle(page) -> None:
    """The page's heading is there, its requests done and nothing still says it is loading."""
    expect(page.get_by_role("heading", level=1)).to_have_count(1, timeout=UI)
    page.wait_for_load_state("networkidle")
    expect(page.get_by_test_id("loading")).to_have_count(0, timeout=UI)
    page.wait_for_timeout(300)  # transitions (Mantine's are 150-200 ms)


def _violations(page) -> list[dict]:
    """Every axe-core violation on the page (all its rules: WCAG 2.0-2.2 A/AA and best practice),
    each with its nodes' targets."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => { const r = await axe.run(document); return r.violations; }")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "nodes": [(n["target"], (n.get("failureSummary") or "")[:300]) for n in v["nodes"][:8]],
         "count": len(v["nodes"])}
        for v in result
    ]


def _axe(page, everything: dict | None = None, key: str = "") -> list[dict]:
    """The critical and serious violations on the page; all of them go into `everything[key]`."""
    found = _violations(page)
    if everything is not None:
        everything[key] = found
    return [v for v in found if v["impact"] in BLOCKING]


def _scan_all(site: dict, new_page, scheme: str, report: Path) -> dict[str, list[dict]]:
    assert AXE.is_file(), f"{AXE} is missing: run `npm ci` in frontend/ (axe-core is a devDependency)"
    page = new_page(site["url"])
    page.context.add_init_script(f"window.localStorage.setItem('cairn.colorScheme', '{scheme}')")
    found: dict[str, list[dict]] = {}
    everything: dict[str, list[dict]] = {}
    page.goto("/signin")
    _settle(page)
    assert page.locator("html").get_attribute("data-mantine-color-scheme") == scheme
    found["/signin"] = _axe(page, everything, "/signin")
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link").first).to_be_visible(timeout=UI)
    linked = [urlsplit(h).path for h in nav.get_by_role("link").evaluate_all("els => els.map(e => e.href)")]
    assert len(linked) >= 7, linked
    for path in [*linked, *_pages(site)]:
        page.goto(path)
        _settle(page)
        assert page.locator("html").get_attribute("data-mantine-color-scheme") == scheme
        found[path] = _axe(page, everything, path)
        report.write_text(json.dumps(everything, indent=1))
    # open states: the Stop dialog, the user menu, the navigation at 390 px
    page.goto(f"/projects/{PROJECT}/workloads/training/{site['queued']}")
    _settle(page)
    page.get_by_test_id("stop-workload").click()
    expect(page.get_by_role("dialog")).to_be_visible(timeout=UI)
    page.wait_for_timeout(300)
    found["stop dialog"] = _axe(page, everything, "stop dialog")
    page.keyboard.press("Escape")
    page.goto(workloads_url())
    _settle(page)
    page.get_by_test_id("user-menu").click()
    expect(page.get_by_role("menu")).to_be_visible(timeout=UI)
    # scanned mid fade-in, the menu's text is blended with the page (a "contrast" failure of a frame)
    expect(page.get_by_role("menu")).to_have_css("opacity", "1", timeout=UI)
    found["user menu"] = _axe(page, everything, "user menu")
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_role("button", name="Navigation menu").click()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link").first).to_be_in_viewport(timeout=UI)
    page.wait_for_timeout(300)
    found["navigation at 390 px"] = _axe(page, everything, "navigation at 390 px")
    report.write_text(json.dumps(everything, indent=1))
    return {path: v for path, v in found.items() if v}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_critical_or_serious_violation_on_any_page(site, new_page, scheme, tmp_path):
    found = _scan_all(site, new_page, scheme, tmp_path / f"axe-{scheme}.json")
    assert not found, f"axe ({scheme}): " + json.dumps(found, indent=1)[:12000]


# What has focus, and whether a focus indicator is drawn for it: an outline on the element, or for
# a visually hidden input (switch, checkbox, radio) on what is drawn next to it.
FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const ring = (e) => {
    if (!e) return false;
    const s = getComputedStyle(e);
    return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1;
  };
  const hidden = el.matches('input[type=checkbox], input[type=radio]');
  return {
    tag: el.tagName, role: el.getAttribute('role'), testid: el.dataset.testid || null,
    name: (el.getAttribute('aria-label') || (el.labels && el.labels[0] && el.labels[0].textContent)
           || el.textContent || '').trim().slice(0, 60),
    inNav: !!el.closest('nav'), inMain: !!el.closest('main'), inDialog: !!el.closest('[role=dialog]'),
    ring: ring(el) || (hidden && (ring(el.nextElementSibling) || ring(el.parentElement))),
    heading: /^H[1-6]$/.test(el.tagName),
  };
}"""


def _tab_until(page, wanted, *, limit: int = 80, backwards: bool = False, seen: list | None = None) -> dict:
    """Press Tab (Shift+Tab) until `wanted(focused)`; every control passed on the way must show a
    focus indicator."""
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        page.wait_for_timeout(30)
        focused = page.evaluate(FOCUSED)
        assert focused is not None, "focus dropped to the page body"
        if seen is not None:
            seen.append(focused)
        assert focused["ring"] or focused["heading"], f"no visible focus indicator: {focused}"
        if wanted(focused):
            return focused
    raise AssertionError(f"not reached in {limit} Tab presses; last: {focused}")


def _focused(page) -> dict:
    return page.evaluate(FOCUSED)


def test_the_keyboard_alone_signs_in_submits_opens_and_stops_a_job(site, new_page):
    """Item 17 and "Deliver": sign-in, submit, open, stop (through the confirmation dialog, which
    gives focus back), with Tab, Shift+Tab, Enter and Escape only; every control on the way shows
    a focus indicator, in both themes' default (the light one here; the dark one below)."""
    page = new_page(site["url"])
    page.goto("/signin")
    expect(page.get_by_role("heading", level=1)).to_be_visible(timeout=UI)
    assert _focused(page)["name"].startswith("Username"), _focused(page)  # autofocus
    page.keyboard.type("erin")
    page.keyboard.press("Tab")
    assert _focused(page)["name"].startswith("Password") and _focused(page)["ring"], _focused(page)
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    expect(page.get_by_test_id("workload-row").first).to_be_visible(timeout=UI)
    expect(page.locator("main h1")).to_be_focused(timeout=UI)  # signed in: focus on the page's heading

    # on a page load, the skip link is the first stop, and takes focus past the header and the navigation
    page.reload()
    expect(page.get_by_test_id("workload-row").first).to_be_visible(timeout=UI)
    first = _tab_until(page, lambda f: True)
    assert first["testid"] == "skip-link", first
    page.keyboard.press("Enter")
    assert _focused(page)["inMain"], _focused(page)
    _tab_until(page, lambda f: f["testid"] == "submit-work")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/workloads/new"), timeout=UI)
    expect(page.get_by_test_id("submit-form")).to_be_visible(timeout=UI)
    expect(page.locator("main h1")).to_be_focused(timeout=UI)  # focus moved to the new page

    seen: list[dict] = []
    _tab_until(page, lambda f: f["name"].startswith("Name"), seen=seen)
    page.keyboard.type("by-keyboard")
    _tab_until(page, lambda f: f["name"].startswith("Command"), seen=seen)
    page.keyboard.type("sleep 300")
    _tab_until(page, lambda f: f["name"].startswith("CPUs"), seen=seen)
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("0.5")
    _tab_until(page, lambda f: f["testid"] == "submit-workload", seen=seen)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/projects/{PROJECT}/workloads/training/\d+$"), timeout=UI)
    job = int(page.url.rsplit("/", 1)[1])
    expect(page.locator("main h1")).to_have_text("by-keyboard", timeout=UI)
    # inputs and selects passed on the way showed their focus too
    kinds = {f["tag"] for f in seen}
    assert {"INPUT", "BUTTON"} <= kinds, kinds

    # open it from the list: back to the navigation with Shift+Tab, then the job's link
    expect(page.locator("main h1")).to_be_focused(timeout=UI)
    _tab_until(page, lambda f: f["inNav"] and f["name"] == "Workloads", backwards=True)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    expect(page.locator("main h1")).to_be_focused(timeout=UI)
    row = page.locator(f"[data-testid=workload-row][data-workload-id='{job}']")
    expect(row).to_be_visible(timeout=UI)
    _tab_until(page, lambda f: f["inMain"] and f["tag"] == "A" and f["name"] == "by-keyboard")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/workloads/training/{job}$"), timeout=UI)
    expect(page.get_by_test_id("stop-workload")).to_be_enabled(timeout=UI)

    # Stop asks first; Escape cancels and gives focus back to Stop
    _tab_until(page, lambda f: f["testid"] == "stop-workload")
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible(timeout=UI)
    expect(dialog).to_have_accessible_name(re.compile("Stop by-keyboard"))
    expect(dialog.get_by_test_id("stop-cancel")).to_be_focused()  # the safe choice first
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0, timeout=UI)
    expect(page.get_by_test_id("stop-workload")).to_be_focused(timeout=UI)
    # Tab stays inside the open dialog; confirming moves focus to the page's heading, not the body
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible(timeout=UI)
    stop = _tab_until(page, lambda f: f["testid"] == "stop-confirm-button", limit=5)
    assert stop["inDialog"], stop
    page.keyboard.press("Enter")
    expect(dialog).to_have_count(0, timeout=UI)
    expect(page.get_by_test_id("workload-name")).to_be_focused(timeout=UI)
    expect(page.get_by_test_id("status-badge").first).to_have_attribute(
        "data-status", re.compile("stopping|stopped"), timeout=UI)
    api = requests.get(f"{site['url']}/api/v1/projects/{PROJECT}/training-jobs/{job}/",
                       headers={"Authorization": f"Bearer {site['token']}"}, timeout=10).json()
    assert api["status"] in ("stopping", "stopped"), api["status"]


def test_at_390px_the_hidden_navigation_takes_no_tab_stop_until_the_menu_opens_it(site, new_page, tmp_path):
    """Item 18: collapsed behind the menu button, the navigation is not reachable by Tab (it was:
    its links took focus off-screen); the menu button opens it and its links then take focus;
    Escape closes it and focus returns to the button. Both themes show the focus ring."""
    page = new_page(site["url"])
    page.context.add_init_script("window.localStorage.setItem('cairn.colorScheme', 'dark')")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    page.reload()  # Tab from the top of the page
    expect(page.get_by_test_id("workload-row").first).to_be_visible(timeout=UI)
    menu = page.get_by_role("button", name="Navigation menu")
    expect(menu).to_be_visible()
    nav = page.locator("nav#main-navigation")
    expect(nav).to_have_attribute("inert", "")
    # Tab from the top to the page's own Submit button: nothing in the hidden navigation on the way
    seen: list[dict] = []
    _tab_until(page, lambda f: f["testid"] == "submit-work", seen=seen)
    assert not [f for f in seen if f["inNav"]], [f for f in seen if f["inNav"]]
    assert any(f["testid"] == "nav-toggle" for f in seen), seen

    _tab_until(page, lambda f: f["testid"] == "nav-toggle", backwards=True)
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(nav).not_to_have_attribute("inert", "")
    storage = nav.get_by_role("link", name="Storage")
    expect(storage).to_be_in_viewport()
    page.screenshot(path=str(tmp_path / "menu-open-390.png"))
    inside = _tab_until(page, lambda f: f["inNav"], limit=30)
    assert inside["tag"] == "A", inside
    page.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(menu).to_be_focused()
    expect(nav).to_have_attribute("inert", "")
    expect(storage).not_to_be_in_viewport()
    # open again, and follow a link: the page changes, the navigation closes
    page.keyboard.press("Enter")
    _tab_until(page, lambda f: f["inNav"] and f["name"] == "Storage", limit=30)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/projects/{PROJECT}/storage$"), timeout=UI)
    expect(page.locator("main h1")).to_be_focused(timeout=UI)
    expect(nav).to_have_attribute("inert", "")


def test_gpu_details_and_chart_data_are_reachable_by_keyboard(site, new_page):
    """Item 16: the GPU heatmap's details show on focus, not on hover only, and move with the
    arrow keys; a chart's points are a table one Tab and Enter away; the log view takes focus."""
    page = new_page(site["url"])
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    page.goto("/cluster")
    grid = page.get_by_role("grid", name=re.compile("GPU utilisation"))
    expect(grid).to_be_visible(timeout=UI)
    cell = _tab_until(page, lambda f: f["role"] == "gridcell", limit=120)
    assert cell["name"].startswith("gpu-spare · GPU 0"), cell
    expect(page.get_by_role("tooltip", name=re.compile("gpu-spare · GPU 0"))).to_be_visible(timeout=UI)
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tooltip", name=re.compile("gpu-spare · GPU 1"))).to_be_visible(timeout=UI)
    expect(page.get_by_role("tooltip")).to_have_count(1, timeout=UI)  # GPU 0's closed
    assert _focused(page)["name"].startswith("gpu-spare · GPU 1")

    page.goto(f"/projects/{PROJECT}/workloads/training/{site['job']}")
    log = page.get_by_role("log")
    expect(log).to_contain_text("epoch 5", timeout=UI)
    chart = page.get_by_test_id("metrics-chart")
    expect(chart).to_have_attribute("data-point-count", re.compile(r"^[1-9]\d*$"), timeout=UI)
    expect(page.get_by_role("img", name=re.compile(r"^Metrics: \d+ series over steps 1–5\."))).to_be_visible()
    _tab_until(page, lambda f: f["testid"] == "chart-table-toggle", limit=40)
    page.keyboard.press("Enter")
    table = page.get_by_test_id("chart-table").get_by_role("table")
    expect(table).to_be_visible()
    expect(table.get_by_role("rowheader")).to_have_count(5)
    _tab_until(page, lambda f: f["role"] == "log", limit=120)  # the log, further down, takes focus
    log.press("PageUp")
    # and the page still passes axe with the table open
    assert not _axe(page), _axe(page)
