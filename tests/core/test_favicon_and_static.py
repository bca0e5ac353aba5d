"""No noise on start or page load: WhiteNoise finds its static root, and /favicon.ico is served."""
import warnings

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def test_the_static_middleware_starts_without_a_warning():
    from whitenoise.middleware import WhiteNoiseMiddleware

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WhiteNoiseMiddleware(lambda request: None)


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
