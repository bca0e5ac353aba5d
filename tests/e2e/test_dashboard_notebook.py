"""A real notebook through Cairn's own proxy (issue 23), in Debian's chromium against a live Cairn:
its creator signs in, opens it from the dashboard at Cairn's URL (/nb/<project>/<id>/lab), creates
a notebook, runs `print(6*7)` and sees 42 (the kernel's websocket went through the proxy), and
opens a terminal (its websocket too). A viewer and another member get 403 at the same URL, an
outsider 404, and a signed-out browser the sign-in page."""
import re
import time

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import JOB, PASSWORD, PROJECT, UI, cairn, sign_in  # noqa: F401 - cairn is a fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(300)]


def _add_members() -> None:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    from apps.projects.models import Project
    from tests.factories import MembershipFactory, UserFactory

    # Hashed as the server checks it (the tests' own fast hasher is not in the server's list).
    hasher = PBKDF2PasswordHasher()
    for username, role in (("vic", "viewer"), ("max", "member")):
        user = UserFactory(username=username)
        type(user).objects.filter(pk=user.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
        MembershipFactory(project=Project.objects.get(slug=PROJECT), user=user, role=role)
    olga = type(user).objects.get(username="olga")  # owner of another project: an outsider here
    type(user).objects.filter(pk=olga.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))


def test_the_creator_works_in_jupyterlab_through_cairns_url_and_nobody_else_gets_in(cairn, new_page):  # noqa: F811
    in_thread(_add_members)
    api = f"{cairn.url}/api/v1/projects/{PROJECT}/notebooks/"
    erin = {"Authorization": f"Bearer {cairn.token('erin')}"}
    vic = {"Authorization": f"Bearer {cairn.token('vic')}"}
    created = requests.post(api, json={"name": "nb", "resources": {"cpu": 0.5, "memory": "1Gi"}}, headers=erin,
                            timeout=10)
    assert created.status_code == 201, created.text
    notebook = created.json()["id"]
    lab_url = f"/nb/{PROJECT}/{notebook}/lab"
    deadline = time.monotonic() + JOB / 1000
    while True:
        body = requests.get(f"{api}{notebook}/", headers=erin, timeout=10).json()
        if body["status"] == "running" and body["endpoint"]:
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.3)
    assert body["endpoint"] == lab_url
    assert requests.get(f"{api}{notebook}/", headers=vic, timeout=10).json()["endpoint"] is None

    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page.get_by_test_id("live-indicator")).to_have_attribute("data-status", "open", timeout=UI)
    page.goto(f"/projects/{PROJECT}/workloads?kind=notebook")
    expect(page.get_by_role("row", name=re.compile(r"\bnb\b.*\berin\b"))).to_be_visible(timeout=UI)  # its owner
    page.goto(f"/projects/{PROJECT}/workloads/notebook/{notebook}")
    expect(page.get_by_test_id("notebook-idle")).to_be_visible(timeout=UI)
    expect(page.get_by_test_id("notebook-cull-at")).to_have_text(re.compile(r"^in \d"), timeout=UI)
    expect(page.get_by_test_id("notebook-gpu")).to_have_text("no telemetry")
    button = page.get_by_test_id("open-service")
    expect(button).to_have_text("Open notebook", timeout=UI)
    expect(button).to_have_attribute("href", lab_url)
    with page.context.expect_page(timeout=JOB) as opened:
        button.click()
    lab = opened.value
    sockets, terminal_output = [], []

    def watch(ws):
        sockets.append(ws.url)
        if "/terminals/websocket/" in ws.url:
            ws.on("framereceived", lambda payload: terminal_output.append(
                payload if isinstance(payload, str) else payload.decode(errors="replace")))

    lab.on("websocket", watch)
    expect(lab).to_have_url(f"{cairn.url}{lab_url}", timeout=JOB)  # Cairn's own address, no token in it
    expect(lab).to_have_title(re.compile("JupyterLab"), timeout=JOB)

    # A new notebook from the launcher, one cell: print(6*7) -> 42, through the kernel's websocket.
    lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=JOB)
    cell = lab.locator(".jp-Notebook .jp-Cell .cm-content").first
    expect(cell).to_be_visible(timeout=JOB)
    # The kernel's status arrives over its websocket (through the proxy): idle once it is ready.
    expect(lab.locator(".jp-StatusBar-Widget", has_text=re.compile(r"\| Idle"))).to_be_visible(timeout=JOB)
    cell.click()
    lab.keyboard.type("print(6*7)")
    lab.keyboard.press("Shift+Enter")
    expect(lab.locator(".jp-OutputArea-output").first).to_have_text("42", timeout=JOB)
    kernel_sockets = [url for url in sockets if "/api/kernels/" in url]
    assert kernel_sockets and all(url.startswith(cairn.url.replace("http", "ws") + f"/nb/{PROJECT}/{notebook}/")
                                  for url in kernel_sockets), sockets

    # A terminal (File > New > Terminal); its websocket goes through the proxy too and carries output.
    lab.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
    lab.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^New$")).hover()
    lab.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Terminal$")).click()
    terminal = lab.locator(".jp-Terminal").first
    expect(terminal).to_be_visible(timeout=JOB)
    deadline = time.monotonic() + JOB / 1000
    while not terminal_output:  # the shell's prompt
        assert time.monotonic() < deadline, sockets
        lab.wait_for_timeout(200)
    terminal.click()
    lab.keyboard.type("echo $((6*7))x\n")
    while not any("42x" in frame for frame in terminal_output):
        assert time.monotonic() < deadline, terminal_output[-5:]
        lab.wait_for_timeout(200)
    assert all(url.startswith(cairn.url.replace("http", "ws") + f"/nb/{PROJECT}/{notebook}/") for url in sockets)

    # The same URL for everyone else.
    for username, status in (("vic", 403), ("max", 403), ("olga", 404)):
        other = new_page(cairn.url)
        sign_in(other, username)
        expect(other).not_to_have_url(re.compile(r"/signin"), timeout=UI)
        answer = other.goto(lab_url)
        assert answer.status == status, (username, answer.status)
        expect(other.locator("body")).to_contain_text("detail")
    stranger = new_page(cairn.url)
    stranger.goto(lab_url)
    expect(stranger).to_have_url(re.compile(r"/signin\?next="), timeout=UI)
    expect(stranger.get_by_test_id("signin-submit")).to_be_visible(timeout=UI)

    stopped = requests.post(f"{api}{notebook}/stop/", headers=erin, timeout=10)
    assert stopped.status_code == 202, stopped.text
