"""Getting around the dashboard (issue 46, items 17 and 19), in Debian's chromium against a live
Cairn: the sign-in page loads no charting code (pages are chunks of their own); every route has
its own document title; the first Tab stop is a skip link to the content; the navigation marks
the current page (aria-current) and moving to another page moves focus to its heading; each page
has one h1 (the logo is no heading) and the sign-in page a main landmark (item 16)."""
import gzip
import re
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.test_dashboard import sign_in
from tests.e2e.test_dashboard_forms import server  # noqa: F401 - a fixture: a live Cairn, project "dash"

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
UI = 15_000
# Today's one bundle was 287 KB gzipped; the sign-in page may load at most half of that.
SIGN_IN_JS_BUDGET = 287 * 1024 // 2


def test_the_sign_in_page_loads_no_charting_code_and_half_the_javascript(server, new_page):  # noqa: F811
    page = new_page(server.url)
    scripts: list[str] = []
    page.on("response", lambda r: scripts.append(r.url) if urlsplit(r.url).path.endswith(".js") else None)
    page.goto("/signin")
    expect(page.get_by_test_id("signin-submit")).to_be_visible(timeout=UI)
    page.wait_for_load_state("networkidle")
    expect(page).to_have_title("Sign in · Cairn")
    assert scripts, "no script loaded?"
    total = 0
    for url in scripts:
        body = requests.get(url, timeout=10).content
        assert b"uPlot" not in body, f"{url} carries uPlot"
        total += len(gzip.compress(body, 9))
    assert total <= SIGN_IN_JS_BUDGET, (total, scripts)
    # the charts' code arrives with a page that draws charts
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    before = len(scripts)
    page.goto("/projects/dash/runs")
    expect(page.get_by_role("heading", name=re.compile("Runs"))).to_be_visible(timeout=UI)
    page.wait_for_load_state("networkidle")
    assert len(scripts) > before


def test_titles_skip_link_current_page_and_focus_on_navigation(server, new_page):  # noqa: F811
    page = new_page(server.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    expect(page).to_have_title("Workloads · dash · Cairn")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Workloads")).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Storage")).not_to_have_attribute("aria-current", "page")

    # the first Tab stop: the skip link, which takes focus past the header and the navigation
    page.reload()
    expect(page.get_by_test_id("workload-row").first).to_be_visible(timeout=UI)
    page.keyboard.press("Tab")
    skip = page.get_by_test_id("skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_have_text("Skip to content")
    assert skip.bounding_box()["x"] >= 0  # on screen once focused
    page.keyboard.press("Enter")
    focused = page.evaluate("() => [document.activeElement.tagName, !!document.activeElement.closest('main')]")
    assert focused[1] and focused[0] in ("H1", "MAIN"), focused

    # the navigation moves focus to the new page's heading, and the title follows
    nav.get_by_role("link", name="Storage").click()
    expect(page).to_have_url(re.compile(r"/projects/dash/storage$"), timeout=UI)
    expect(page).to_have_title("Storage · dash · Cairn")
    expect(nav.get_by_role("link", name="Storage")).to_have_attribute("aria-current", "page")
    expect(page.locator("main h1").first).to_be_focused(timeout=UI)
    nav.get_by_role("link", name="Cluster").click()
    expect(page).to_have_title("Cluster · Cairn", timeout=UI)
    expect(page.locator("main h1").first).to_be_focused(timeout=UI)


def test_one_h1_per_page_and_the_sign_in_page_has_main(server, new_page):  # noqa: F811
    page = new_page(server.url)
    page.goto("/signin")
    expect(page.get_by_role("main")).to_have_count(1, timeout=UI)
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to Cairn")
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    for path, title in [("/projects/dash/workloads", "Workloads"), ("/projects/dash/storage", "Storage"),
                        ("/cluster", "Cluster"), ("/tokens", "API tokens")]:
        page.goto(path)
        h1 = page.get_by_role("heading", level=1)
        expect(h1).to_have_text(title, timeout=UI)
        expect(h1).to_have_count(1)
    # the logo is a link home, not a heading
    expect(page.get_by_role("heading", name="Cairn", exact=True)).to_have_count(0)
    expect(page.get_by_role("banner").get_by_role("link", name="Cairn", exact=True)).to_be_visible()


def test_at_390px_a_menu_button_opens_the_navigation(server, new_page, tmp_path):  # noqa: F811
    """Item 18: on a phone-sized screen the navigation does not cover the content; a menu button
    in the header opens it, and the header's controls stay on screen."""
    page = new_page(server.url)
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
    expect(page.get_by_role("heading", level=1)).to_have_text("Workloads", timeout=UI)
    menu = page.get_by_role("button", name="Navigation menu")
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    nav = page.get_by_role("navigation", name="Main")
    storage = nav.get_by_role("link", name="Storage")
    expect(storage).not_to_be_in_viewport()
    # nothing in the header, or the page's own Submit button, is cut off
    submit = page.get_by_test_id("submit-work")
    expect(submit).to_be_visible()
    assert submit.evaluate("b => b.scrollWidth <= b.clientWidth"), "Submit button's label clipped"
    for control in (menu, page.get_by_test_id("project-switcher"), page.get_by_test_id("user-menu"), submit):
        box = control.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert page.screenshot(path=str(tmp_path / "workloads-390.png"))
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(storage).to_be_in_viewport()
    storage.click()
    expect(page).to_have_url(re.compile(r"/projects/dash/storage$"), timeout=UI)
    expect(page.get_by_role("heading", level=1)).to_have_text("Storage", timeout=UI)
    # the navigation closes once a page is chosen, uncovering it
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(storage).not_to_be_in_viewport()
