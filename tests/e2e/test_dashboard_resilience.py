"""The workload page's Goodput panel in a real browser (Debian's chromium through Playwright)
against a live Cairn (`manage.py run_embedded` on the test PostgreSQL): a finished 3-rank training
job whose rows (events, checkpoints, each rank's step times) make rank 1 a straggler and record a
hang and its restart. The page reads them from the kind-independent /workloads/<id>/resilience/
and shows the goodput, the bar of productive against lost time, the straggler badge on rank 1
only, the restart with its cause and the checkpoints on the status bar."""
import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import sign_in
from tests.processes import EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
UI = 15_000


def _seed() -> int:
    """The job: attempt 1 from t0, checkpoint at 40 s, stuck from 60 s (the diagnosis at 90 s with a
    30 s hang_timeout), restarted at 100 s; attempt 2's first step at 110 s, a checkpoint at 150 s,
    done at 200 s: 130 s productive of 200 s (20 s redone, 40 s hung, 10 s restarting)."""
    from django.utils import timezone

    from apps.clusters.services import local_cluster_register
    from apps.training.models import AttemptProgress, Checkpoint
    from apps.training.services import replica_progress_record
    from apps.workloads.choices import EventType
    from apps.workloads.models import Workload, WorkloadEvent
    from tests.factories import MembershipFactory, ProjectFactory, UserFactory, WorkloadFactory

    node = local_cluster_register()
    project = ProjectFactory(slug="dash", name="Dashboard")
    MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
    t0 = timezone.now() - timedelta(hours=1)
    at = lambda seconds: t0 + timedelta(seconds=seconds)  # noqa: E731 - a local shorthand
    job = WorkloadFactory(project=project, pool=node.pool, kind="training", name="ddp-resnet", replicas=3, gpu_milli=1000,
                          status="succeeded", attempt=2, started_at=at(0), finished_at=at(200),
                          spec={"command": "python train.py", "hang_timeout_seconds": 30, "straggler_policy": "alert"},
                          runtime={"stragglers": [1]})
    Workload.objects.filter(pk=job.pk).update(created_at=at(-10))

    def event(seconds, reason, from_status="", to_status="", attachment="", message=""):
        row = WorkloadEvent.objects.create(workload=job, reason=reason, from_status=from_status, to_status=to_status,
                                           type=EventType.NORMAL, attachment=attachment, message=message)
        WorkloadEvent.objects.filter(pk=row.pk).update(created_at=at(seconds))

    event(-10, "Submitted", "", "queued")
    event(-5, "Admitted", "queued", "admitted")
    event(0, "Started", "admitted", "running")
    event(90, "Hung", attachment="Thread 0x1 (active): all_reduce ...")
    event(100, "Hung", message="Hung: replica 1 at step 40 made no step progress and wrote no output for 30s. "
                               "Starting attempt 2 of 3 from the last checkpoint.")
    event(200, "Succeeded", "running", "succeeded")
    for attempt, step, seconds in ((1, 40, 40), (2, 150, 150)):
        checkpoint = Checkpoint.objects.create(workload=job, attempt=attempt, step=step, name=f"step-{step}",
                                               size_bytes=3 * 1024 * 1024, save_seconds=0.8, blocking_seconds=0.1,
                                               two_stage=True)
        Checkpoint.objects.filter(pk=checkpoint.pk).update(created_at=at(seconds))
    AttemptProgress.objects.create(workload=job, attempt=1, first_step=0, first_step_at=at(5))
    AttemptProgress.objects.create(workload=job, attempt=2, first_step=41, first_step_at=at(110))
    for replica, seconds in ((0, 0.5), (1, 1.5), (2, 0.5)):  # rank 1: three times its peers' step time
        replica_progress_record(workload_id=job.pk, attempt=2, replica=replica, step=199,
                                steps=[(step, seconds) for step in range(180, 200)], at=at(199))
    return job.pk


def test_goodput_panel_shows_lost_time_the_restart_checkpoints_and_a_straggler_badge(tmp_path, settings, new_page):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's
    job = in_thread(_seed)
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1"), log=tmp_path / "server.log")
    try:
        page = new_page(server.url)
        asked: list[str] = []
        page.on("request", lambda request: asked.append(urlsplit(request.url).path))
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
        page.goto(f"/projects/dash/workloads/training/{job}")

        panel = page.get_by_test_id("resilience-panel")
        expect(panel).to_be_visible(timeout=UI)
        expect(panel.get_by_test_id("goodput-value")).to_have_text("65%")  # 130 s of 200 s
        # lost: 40 s hung (60 -> 100 s), 20 s redone (40 -> 60 s), 10 s restarting (100 -> 110 s)
        expect(panel.get_by_test_id("goodput-losses")).to_have_text(
            "Lost 1m 10s: 20s redone, 40s hung, 10s restarting · 0.06 GPU-h")
        parts = panel.get_by_test_id("goodput-part")
        expect(parts).to_have_count(4)
        assert [parts.nth(i).get_attribute("data-part") for i in range(4)] == ["productive", "redone", "hung", "overhead"]
        bar_width = panel.get_by_test_id("goodput-bar").bounding_box()["width"]
        productive = panel.locator("[data-testid=goodput-part][data-part=productive]").bounding_box()["width"]
        assert productive == pytest.approx(0.65 * bar_width, abs=2), (productive, bar_width)

        # the straggler badge is on rank 1 and only there, with how much slower it is
        expect(panel.get_by_test_id("rank-row")).to_have_count(3)
        badges = panel.get_by_test_id("straggler-badge")
        expect(badges).to_have_count(1)
        expect(badges).to_have_attribute("data-replica", "1")
        expect(badges).to_have_text("Straggler · 3.0× the median")
        expect(panel.locator("[data-testid=rank-row][data-replica='1']")).to_have_attribute("data-straggler", "true")
        expect(panel.locator("[data-testid=rank-row][data-replica='0']")).to_contain_text("0.5× the median")

        restart = panel.get_by_test_id("restart-row")
        expect(restart).to_have_count(1)
        expect(restart).to_have_attribute("data-cause", "Hung")
        expect(restart).to_contain_text("at step 41")
        expect(panel.get_by_test_id("checkpoint-summary")).to_contain_text("2 checkpoints · last at step 150 (3.0 MiB")

        # both checkpoints are ticks on the status bar, inside its running stretch
        ticks = page.get_by_test_id("status-timeline").get_by_test_id("timeline-checkpoint")
        expect(ticks).to_have_count(2)
        expect(ticks.first).to_have_attribute("aria-label", re.compile(r"^Checkpoint at step 40 · 3\.0 MiB"))
        running = page.locator("[data-testid=timeline-segment][data-status=running]").bounding_box()
        for i in range(2):
            tick = ticks.nth(i).bounding_box()
            assert running["x"] <= tick["x"] <= running["x"] + running["width"], (tick, running)

        # read through the kind-independent route, like the rest of the page
        assert f"/api/v1/projects/dash/workloads/{job}/resilience/" in asked, asked
        assert not [p for p in asked if "/training-jobs/" in p], asked
    finally:
        server.stop()
        in_thread(lambda: call_command("flush", interactive=False, verbosity=0, allow_cascade=True))
