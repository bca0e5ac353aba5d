"""The sweep pages in a real browser (Debian's chromium through Playwright) against a live Cairn
(`manage.py run_embedded` on the test PostgreSQL): a sweep of three real trials runs to the end,
then its page shows the best trial, the objective by trial, the parallel coordinates, the
importance, the trials table, and opens the comparison view with the trials' runs. Another
sweep's page, open while its trials run, follows them over the live socket (it does not poll
while the socket is up) and deletes the sweep once it has ended."""
import re
import textwrap
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import PASSWORD, sign_in
from tests.processes import EmbeddedServer, cairn_env, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
UI = 15_000

TRIAL = textwrap.dedent("""
    import json, os
    import cairn
    params = json.loads(os.environ["CAIRN_SWEEP_PARAMS"])
    cairn.init(system_metrics=False)
    for epoch in range(1, 4):
        cairn.log({"acc": params["quality"] * epoch / 3}, step=epoch)
    assert cairn.finish(timeout=60)
""")


def test_sweep_page_shows_trials_best_plots_and_opens_the_comparison(tmp_path, shared_dir, settings, new_page):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's

    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared_dir)]
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug="dash", name="Dashboard")
        MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=4000, nominal_memory_mb=16384)

    in_thread(seed)
    (shared_dir / "trial.py").write_text(TRIAL)
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1", CAIRN_SCHEDULER_INTERVAL="0.3",
                                      CAIRN_RECONCILER_INTERVAL="0.3", CAIRN_SWEEP_INTERVAL="0.3"),
                            log=tmp_path / "server.log")
    try:
        token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                              timeout=10).json()["token"]
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        api = f"{server.url}/api/v1/projects/dash/sweeps/"
        created = http.post(api, json={
            "name": "lr-search", "objective": {"metric": "acc"}, "algorithm": "random", "seed": 3,
            "space": {"quality": {"type": "float", "low": 0.1, "high": 0.9},
                      "solver": {"type": "categorical", "choices": ["adam", "sgd"]}},
            "budget": {"max_trials": 3}, "max_concurrent": 2,
            "template": {"command": f"python {shared_dir / 'trial.py'}", "resources": {"cpu": 0.5, "memory": "256Mi"}},
        }, timeout=10)
        assert created.status_code == 201, created.text
        sweep = created.json()["id"]
        wait_for(lambda: http.get(f"{api}{sweep}/", timeout=10).json()["status"] == "completed", timeout=150,
                 interval=0.5, message="the sweep to complete")
        trials = http.get(f"{api}{sweep}/trials/", timeout=10).json()["results"]
        best = max(trials, key=lambda t: t["objective"])

        page = new_page(server.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
        page.get_by_role("link", name="Sweeps").click()
        row = page.get_by_test_id("sweep-row")
        expect(row).to_have_count(1, timeout=UI)
        expect(row).to_contain_text("completed")
        row.get_by_role("link", name="lr-search").click()
        expect(page).to_have_url(re.compile(rf"/projects/dash/sweeps/{sweep}$"), timeout=UI)
        expect(page.get_by_test_id("trial-row")).to_have_count(3, timeout=UI)
        expect(page.locator("[data-testid=trial-row][data-status=succeeded]")).to_have_count(3)
        expect(page.get_by_test_id("best-trial")).to_contain_text(f"trial {best['number']}")
        expect(page.get_by_test_id("parallel-coordinates")).to_have_attribute("data-lines", "3", timeout=UI)
        expect(page.get_by_test_id("objective-chart")).to_be_visible()
        expect(page.get_by_test_id("param-importance")).to_contain_text("%", timeout=60_000)  # Optuna imports its estimators first
        page.get_by_test_id("compare-trials").click()
        runs = sorted(t["run"] for t in trials)
        expect(page).to_have_url(re.compile(rf"/projects/dash/compare\?runs={','.join(map(str, runs))}$"), timeout=UI)
        expect(page.get_by_test_id("parallel-coordinates")).to_have_attribute("data-lines", "3", timeout=UI)
    finally:
        server.stop()


GATED_TRIAL = textwrap.dedent("""
    import json, os, pathlib, sys, time
    import cairn
    params = json.loads(os.environ["CAIRN_SWEEP_PARAMS"])
    cairn.init(system_metrics=False)
    cairn.log({"acc": params["quality"] / 2}, step=1)
    gate = pathlib.Path(sys.argv[1])
    deadline = time.monotonic() + 120
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    cairn.log({"acc": params["quality"]}, step=2)
    assert cairn.finish(timeout=60)
""")


def test_sweep_page_follows_its_trials_live_and_deletes_the_ended_sweep(tmp_path, shared_dir, settings, new_page):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's

    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared_dir)]
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug="dash", name="Dashboard")
        MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=4000, nominal_memory_mb=16384)

    in_thread(seed)
    (shared_dir / "trial.py").write_text(GATED_TRIAL)
    gate = Path(shared_dir) / "gate"
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1", CAIRN_SCHEDULER_INTERVAL="0.3",
                                      CAIRN_RECONCILER_INTERVAL="0.3", CAIRN_SWEEP_INTERVAL="0.3"),
                            log=tmp_path / "server.log")
    try:
        page = new_page(server.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
        page.get_by_role("link", name="Sweeps").click()
        expect(page.get_by_text("No sweeps yet")).to_be_visible(timeout=UI)

        token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                              timeout=10).json()["token"]
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        api = f"{server.url}/api/v1/projects/dash/sweeps/"
        created = http.post(api, json={
            "name": "gated", "objective": {"metric": "acc"}, "algorithm": "random", "seed": 5,
            "space": {"quality": {"type": "float", "low": 0.1, "high": 0.9}},
            "budget": {"max_trials": 2}, "max_concurrent": 1,
            "template": {"command": f"python {shared_dir / 'trial.py'} {gate}",
                         "resources": {"cpu": 0.5, "memory": "256Mi"}},
        }, timeout=10)
        assert created.status_code == 201, created.text
        sweep = created.json()["id"]
        # The list, open before the sweep existed, shows it without a reload (topic `sweeps`).
        row = page.get_by_test_id("sweep-row")
        expect(row).to_have_count(1, timeout=UI)
        row.get_by_role("link", name="gated").click()
        expect(page).to_have_url(re.compile(rf"/projects/dash/sweeps/{sweep}$"), timeout=UI)
        expect(page.get_by_test_id("live-indicator")).to_have_attribute("data-status", "open", timeout=UI)

        trials = page.get_by_test_id("trial-row")
        expect(page.locator("[data-testid=trial-row][data-status=running]")).to_have_count(1, timeout=60_000)
        expect(trials).to_have_count(1)  # one at a time: the second waits for the first
        gate.touch()
        try:
            expect(page.locator("[data-testid=trial-row][data-status=succeeded]")).to_have_count(2, timeout=60_000)
        except AssertionError:
            trials_now = http.get(f"{api}{sweep}/trials/", timeout=30).json()["results"]
            jobs = http.get(f"{server.url}/api/v1/projects/dash/workloads/", timeout=30).json()["results"]
            raise AssertionError(f"trials: {[(t['number'], t['status']) for t in trials_now]}; jobs: "
                                 f"{[(j['name'], j['status'], j.get('pending_reason')) for j in jobs]}") from None
        expect(page.get_by_test_id("sweep-status")).to_have_attribute("data-status", "completed", timeout=UI)

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_test_id("delete-sweep").click()
        expect(page).to_have_url(re.compile(r"/projects/dash/sweeps$"), timeout=UI)
        expect(page.get_by_text("No sweeps yet")).to_be_visible(timeout=UI)
        assert http.get(f"{api}{sweep}/", timeout=10).status_code == 404
        assert len(http.get(f"{server.url}/api/v1/projects/dash/workloads/", timeout=10).json()["results"]) == 2, \
            "the trials' jobs are kept"
    finally:
        server.stop()
