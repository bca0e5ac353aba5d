"""The workload page's Events card in a real browser (Debian's chromium through Playwright) against
a live Cairn (`manage.py run_embedded` on the test PostgreSQL): a stopped job with 40 events, more
than the card's 360 px show at once. The newest event (what explains the state now) is the first
row and visible without scrolling; the card scrolls with the mouse wheel and, once focused with
Tab, with the keyboard (issue 46, item 1: the card used to clip its rows, oldest first, with
`overflow-y: hidden`)."""
import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import sign_in
from tests.processes import EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
UI = 15_000
RESTARTS = 36


def _seed() -> int:
    from django.utils import timezone

    from apps.clusters.services import local_cluster_register
    from apps.workloads.choices import EventType
    from apps.workloads.models import Workload, WorkloadEvent
    from tests.factories import MembershipFactory, ProjectFactory, UserFactory, WorkloadFactory

    node = local_cluster_register()
    project = ProjectFactory(slug="dash", name="Dashboard")
    MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
    t0 = timezone.now() - timedelta(hours=1)
    at = lambda seconds: t0 + timedelta(seconds=seconds)  # noqa: E731 - a local shorthand
    job = WorkloadFactory(project=project, pool=node.pool, kind="training", name="restless", replicas=1,
                          status="stopped", attempt=RESTARTS + 1, started_at=at(0), finished_at=at(1000),
                          spec={"command": "python train.py"})
    Workload.objects.filter(pk=job.pk).update(created_at=at(-10))

    def event(seconds, reason, from_status="", to_status="", message="", kind=EventType.NORMAL):
        row = WorkloadEvent.objects.create(workload=job, reason=reason, from_status=from_status, to_status=to_status,
                                           type=kind, message=message)
        WorkloadEvent.objects.filter(pk=row.pk).update(created_at=at(seconds))

    event(-10, "Submitted", "", "queued")
    event(-5, "Admitted", "queued", "admitted")
    event(0, "Started", "admitted", "running")
    for n in range(RESTARTS):
        event(10 + 20 * n, "Restarted", message=f"Restart {n + 1}: replica 0 exited with code 1.",
              kind=EventType.WARNING)
    event(990, "Preempted", message="Preempted by higher-priority work.", kind=EventType.WARNING)
    event(1000, "ServerShutdown", "running", "stopped", message="The server shut down; the job was stopped.")
    return job.pk


def test_events_card_shows_the_newest_first_and_scrolls_by_wheel_and_keyboard(tmp_path, settings, new_page):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's
    job = in_thread(_seed)
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1"), log=tmp_path / "server.log")
    try:
        page = new_page(server.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
        page.goto(f"/projects/dash/workloads/training/{job}")

        rows = page.get_by_test_id("event-row")
        expect(rows).to_have_count(RESTARTS + 5, timeout=UI)
        scroller = page.get_by_test_id("events-scroll")
        expect(scroller).to_be_visible()
        # the newest first: ServerShutdown on top, Submitted last
        expect(rows.first).to_have_attribute("data-reason", "ServerShutdown")
        expect(rows.last).to_have_attribute("data-reason", "Submitted")
        # ... and the newest rows are inside the card's visible box (below its sticky header) without scrolling
        scroller.scroll_into_view_if_needed()
        seen = scroller.evaluate("""el => {
            const box = el.getBoundingClientRect(), head = el.querySelector('thead').getBoundingClientRect();
            const rows = [...el.querySelectorAll('[data-testid=event-row]')].slice(0, 2).map(r => r.getBoundingClientRect());
            return {height: box.height, overflowY: getComputedStyle(el).overflowY, scrollTop: el.scrollTop,
                    scrollHeight: el.scrollHeight, clientHeight: el.clientHeight,
                    inside: rows.map(r => r.top >= head.bottom - 1 && r.bottom <= box.bottom + 1)};
        }""")
        assert seen["height"] <= 361 and seen["scrollTop"] == 0 and seen["inside"] == [True, True], seen
        assert seen["overflowY"] in ("auto", "scroll") and seen["scrollHeight"] > seen["clientHeight"], seen

        # the wheel moves it (the pointer is placed again if the page's other panels, still
        # loading, shifted the card from under it)
        scrolled = 0
        for _ in range(10):
            scroller.scroll_into_view_if_needed()
            box = scroller.bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, 300)
            page.wait_for_timeout(300)
            scrolled = scroller.evaluate("el => el.scrollTop")
            if scrolled > 0:
                break
        assert scrolled > 0, "the wheel did not scroll the events"

        # so does the keyboard, once the card has focus: it is in the Tab order and named
        scroller.evaluate("el => { el.scrollTop = 0; }")
        expect(scroller).to_have_attribute("tabindex", "0")
        expect(scroller).to_have_accessible_name(re.compile("Events"))
        scroller.focus()
        expect(scroller).to_be_focused()
        page.keyboard.press("End")
        page.wait_for_function("el => el.scrollTop + el.clientHeight >= el.scrollHeight - 2",
                               arg=scroller.element_handle(), timeout=UI)
        expect(rows.last).to_be_in_viewport()
    finally:
        server.stop()
