"""A real notebook in the dashboard (issue 22, item 3): its creator opens it with one click and
lands in JupyterLab logged in; a viewer of the same project gets no button, and the token is in
no API answer either of them gets."""
import re
import time

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import JOB, PASSWORD, PROJECT, UI, cairn, sign_in  # noqa: F401 - cairn is a fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(240)]


def _add_viewer() -> None:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    from apps.projects.models import Project
    from tests.factories import MembershipFactory, UserFactory

    # Hashed as the server checks it (the tests' own fast hasher is not in the server's list).
    hasher = PBKDF2PasswordHasher()
    user = UserFactory(username="vic")
    type(user).objects.filter(pk=user.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
    MembershipFactory(project=Project.objects.get(slug=PROJECT), user=user, role="viewer")


def test_only_the_creator_gets_the_open_notebook_button_and_it_logs_them_in(cairn, new_page):  # noqa: F811
    in_thread(_add_viewer)
    api = f"{cairn.url}/api/v1/projects/{PROJECT}/notebooks/"
    erin = {"Authorization": f"Bearer {cairn.token('erin')}"}
    vic = {"Authorization": f"Bearer {cairn.token('vic')}"}
    created = requests.post(api, json={"name": "nb", "resources": {"cpu": 0.5, "memory": "1Gi"}}, headers=erin,
                            timeout=10)
    assert created.status_code == 201, created.text
    notebook = created.json()["id"]
    deadline = time.monotonic() + JOB / 1000
    while True:
        body = requests.get(f"{api}{notebook}/", headers=erin, timeout=10).json()
        if body["status"] == "running" and body["endpoint"]:
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.3)
    assert body["endpoint"] == f"/api/v1/projects/{PROJECT}/notebooks/{notebook}/open/"
    assert requests.get(f"{api}{notebook}/", headers=vic, timeout=10).json()["endpoint"] is None

    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page.get_by_test_id("live-indicator")).to_have_attribute("data-status", "open", timeout=UI)
    page.goto(f"/projects/{PROJECT}/workloads/notebook/{notebook}")
    button = page.get_by_test_id("open-service")
    expect(button).to_have_text("Open notebook", timeout=UI)
    expect(button).to_have_attribute("href", body["endpoint"])
    with page.context.expect_page(timeout=JOB) as opened:
        button.click()
    lab = opened.value
    expect(lab).to_have_url(re.compile(r"^http://127\.0\.0\.1:\d+/lab"), timeout=JOB)
    expect(lab).to_have_title(re.compile("JupyterLab"), timeout=JOB)

    viewer = new_page(cairn.url)
    sign_in(viewer, "vic")
    expect(viewer.get_by_test_id("live-indicator")).to_have_attribute("data-status", "open", timeout=UI)
    viewer.goto(f"/projects/{PROJECT}/workloads/notebook/{notebook}")
    expect(viewer.get_by_test_id("workload-name")).to_have_text("nb", timeout=UI)
    expect(viewer.get_by_test_id("open-service")).to_have_count(0)
    assert requests.get(f"{cairn.url}{body['endpoint']}", headers=vic, timeout=10,
                        allow_redirects=False).status_code == 403

    stopped = requests.post(f"{api}{notebook}/stop/", headers=erin, timeout=10)
    assert stopped.status_code == 202, stopped.text
