"""The API reference (/api/docs/ Swagger UI, /api/redoc/ ReDoc) in chromium with every request
to anything but 127.0.0.1 aborted, as on a machine without internet: the pages render from
assets Cairn serves itself, signed out (a page saying how to sign in, not a 401) and signed in
(the whole reference)."""
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.processes import EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

PASSWORD = "pw-for-tests-123"  # tests/factories.py
UI = 20_000  # ms


@pytest.fixture
def server(tmp_path, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's

    def seed():
        from tests.factories import UserFactory

        UserFactory(username="dora")

    in_thread(seed)
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1"),
                            log=tmp_path / "server.log")
    yield server
    server.stop()


def offline_page(new_page, url: str):
    """A page whose requests leave 127.0.0.1 never: they are aborted and listed in `page.outside`."""
    page = new_page(url)
    page.outside, page.errors = [], []

    def route(route):
        if urlparse(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            page.outside.append(route.request.url)
            route.abort()

    page.context.route("**/*", route)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    return page


def test_swagger_ui_renders_offline_signed_out_and_signed_in(server, new_page):
    page = offline_page(new_page, server.url)

    answer = page.goto("/api/docs/")
    assert answer.status == 200
    expect(page.locator(".swagger-ui .info")).to_contain_text("Sign in to read the reference", timeout=UI)
    link = page.locator(".swagger-ui .info a", has_text="sign in")
    assert link.get_attribute("href") == "/signin?next=%2Fapi%2Fdocs%2F"

    # signed in (the dashboard's session sign-in), the page shows the whole reference
    page.request.get("/api/v1/auth/session/")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    signed_in = page.request.post("/api/v1/auth/session/", data={"username": "dora", "password": PASSWORD},
                                  headers={"X-CSRFToken": csrf, "Referer": server.url + "/"})
    assert signed_in.status == 200, signed_in.text()
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .opblock-tag-section").first).to_be_visible(timeout=UI)
    expect(page.locator(".swagger-ui")).to_contain_text("/api/v1/projects/{project}/training-jobs/", timeout=UI)

    assert page.outside == [], "the docs asked for something outside 127.0.0.1"
    assert not [e for e in page.errors if "SwaggerUIBundle" in e or "is not defined" in e], page.errors


def test_redoc_renders_offline(server, new_page):
    page = offline_page(new_page, server.url)

    assert page.goto("/api/redoc/").status == 200
    expect(page.locator("#redoc-container")).to_contain_text("Sign in to read the reference", timeout=UI)

    page.request.get("/api/v1/auth/session/")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    page.request.post("/api/v1/auth/session/", data={"username": "dora", "password": PASSWORD},
                      headers={"X-CSRFToken": csrf, "Referer": server.url + "/"})
    page.goto("/api/redoc/")
    expect(page.locator("#redoc-container")).to_contain_text("training-jobs", timeout=UI)
    assert page.outside == [], "the docs asked for something outside 127.0.0.1"
    assert not [e for e in page.errors if "Redoc" in e], page.errors
