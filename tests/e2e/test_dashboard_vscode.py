"""VS Code (the real code-server that `make code-server` installs) through Cairn's own proxy, in
Debian's chromium against a live Cairn: its creator signs in and opens the notebook's URL
/nb/<project>/<id>/; the workbench loads from Cairn's address, VS Code's remote connection (a
websocket, through the proxy) comes up, and the explorer lists a file that exists only on the
server's disk (file listings travel over that websocket). Another member gets 403 there."""
import re
import time
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import JOB, PASSWORD, PROJECT, UI, cairn, sign_in  # noqa: F401 - cairn is a fixture
from tests.notebooks.code_server import require_code_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(300)]

MARKER = "hello-from-the-server.txt"


def _add_member() -> None:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    from apps.projects.models import Project
    from tests.factories import MembershipFactory, UserFactory

    hasher = PBKDF2PasswordHasher()
    user = UserFactory(username="max")
    type(user).objects.filter(pk=user.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
    MembershipFactory(project=Project.objects.get(slug=PROJECT), user=user, role="member")


def test_the_creator_works_in_vscode_through_cairns_url(cairn, new_page):  # noqa: F811
    require_code_server()
    in_thread(_add_member)
    api = f"{cairn.url}/api/v1/projects/{PROJECT}/notebooks/"
    erin = {"Authorization": f"Bearer {cairn.token('erin')}"}
    created = requests.post(api, json={"name": "code", "ide": "vscode", "resources": {"cpu": 0.5, "memory": "1Gi"}},
                            headers=erin, timeout=10)
    assert created.status_code == 201, created.text
    notebook = created.json()["id"]
    url = f"/nb/{PROJECT}/{notebook}/"
    deadline = time.monotonic() + JOB / 1000
    while True:
        body = requests.get(f"{api}{notebook}/", headers=erin, timeout=10).json()
        if body["status"] == "running" and body["endpoint"]:
            break
        assert body["status"] != "failed", body
        assert time.monotonic() < deadline, body
        time.sleep(0.3)
    assert body["endpoint"] == url
    # A file in the notebook's working folder (the folder code-server opens), on the server's disk only.
    work = Path(cairn.tmp) / "cairn-data" / "workloads" / str(notebook) / "work"
    assert work.is_dir(), sorted(p.name for p in work.parent.iterdir())
    (work / MARKER).write_text("42\n")
    (work / MARKER).chmod(0o644)

    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page).not_to_have_url(re.compile(r"/signin"), timeout=UI)
    sockets, frames = [], []

    def watch(ws):
        sockets.append(ws.url)
        ws.on("framereceived", lambda payload: frames.append(ws.url))

    page.on("websocket", watch)
    page.goto(url)
    # code-server redirects to ./?folder=<the working folder>, relative: still under Cairn's prefix.
    expect(page).to_have_url(re.compile(rf"^{re.escape(cairn.url + url)}\?folder="), timeout=JOB)
    expect(page.locator(".monaco-workbench")).to_be_visible(timeout=JOB)
    # The explorer reads the server's folder over the remote connection.
    expect(page.locator(".explorer-folders-view .monaco-list-row", has_text=MARKER)).to_be_visible(timeout=JOB)
    origin = cairn.url.replace("http", "ws", 1)
    # The dashboard page signed in a moment ago may still open its own live socket (/ws/...) as
    # the browser leaves it: that one is Cairn's, not code-server's.
    vscode = [socket for socket in sockets if not socket.startswith(origin + "/ws/")]
    assert vscode and all(socket.startswith(origin + url) for socket in vscode), sockets
    assert any(frame.startswith(origin + url) for frame in frames), sockets  # code-server answered through the proxy

    # Opening the file shows its content, read from the server's disk.
    page.locator(".explorer-folders-view .monaco-list-row", has_text=MARKER).click()
    expect(page.locator(".monaco-editor .view-lines")).to_contain_text("42", timeout=JOB)

    other = new_page(cairn.url)
    sign_in(other, "max")
    expect(other).not_to_have_url(re.compile(r"/signin"), timeout=UI)
    assert other.goto(url).status == 403

    stopped = requests.post(f"{api}{notebook}/stop/", headers=erin, timeout=10)
    assert stopped.status_code == 202, stopped.text
