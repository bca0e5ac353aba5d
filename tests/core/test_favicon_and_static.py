"""No noise on start or page load: WhiteNoise finds its static root, and /favicon.ico is served."""
import warnings

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def test_the_static_middleware_starts_without_a_warning():
    from apps.core.staticfiles import StaticFilesMiddleware

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StaticFilesMiddleware(lambda request: None)


def test_a_fresh_checkout_gets_its_static_root_when_settings_load(tmp_path):
    """The settings module, run as if it lived in a checkout without var/, creates var/static."""
    import importlib.util

    fresh = tmp_path / "checkout" / "config" / "settings" / "base.py"
    source = open(importlib.util.find_spec("config.settings.base").origin).read()
    namespace = {"__file__": str(fresh), "__name__": "fresh_settings"}
    exec(compile(source, str(fresh), "exec"), namespace)  # noqa: S102 - Cairn's own settings module
    assert namespace["STATIC_ROOT"] == tmp_path / "checkout" / "var" / "static"
    assert namespace["STATIC_ROOT"].is_dir()


def test_favicon_ico_leads_to_the_shipped_icon(client):
    from django.contrib.staticfiles import finders

    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/cairn/favicon.svg"
    # served by WhiteNoise from the app's static files (embedded) or from collectstatic's output
    assert "<svg" in open(finders.find("cairn/favicon.svg")).read()


@pytest.mark.parametrize("template", ["index.html", "frontend_missing.html"])
def test_pages_link_the_icon(template, rf):
    from django.template.loader import render_to_string

    html = render_to_string(template, {"assets": {"css": [], "preload": [], "script": "x.js"}, "config": {}})
    assert '<link rel="icon" type="image/svg+xml" href="/static/cairn/favicon.svg">' in html


def test_the_dev_entry_page_links_the_icon():
    assert 'href="/static/cairn/favicon.svg"' in (settings.BASE_DIR / "frontend" / "index.html").read_text()


def _asgi_get(app, path: str, headers=()) -> list[dict]:
    import asyncio

    sent, asked = [], False

    async def receive():
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), *headers], "client": ("127.0.0.1", 5000),
             "server": ("testserver", 80)}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), timeout=30))
    return sent


@pytest.mark.django_db(transaction=True)
def test_static_files_are_served_under_asgi_without_a_warning(settings):
    """Every static file of every page used to warn "StreamingHttpResponse must consume
    synchronous iterators" under uvicorn."""
    from django.core.handlers.asgi import ASGIHandler

    settings.WHITENOISE_USE_FINDERS = True  # as in embedded mode: straight from the apps' folders
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app = ASGIHandler()
        sent = _asgi_get(app, "/static/cairn/favicon.svg")
        assert sent[0]["status"] == 200
        assert dict(sent[0]["headers"])[b"Content-Type"].startswith(b"image/svg+xml")
        assert b"<svg" in b"".join(m.get("body", b"") for m in sent)

        part = _asgi_get(app, "/static/cairn/favicon.svg", headers=[(b"range", b"bytes=0-3")])
        assert part[0]["status"] == 206 and b"".join(m.get("body", b"") for m in part) == b"<svg"
