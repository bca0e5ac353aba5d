"""The dashboard page (built assets from the Vite manifest, or a helpful page) and /healthz."""
import json
import os

import pytest
from django.db import OperationalError

pytestmark = pytest.mark.django_db


def write_manifest(dist, manifest: dict) -> None:
    path = dist / ".vite" / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))


@pytest.fixture
def dist(settings, tmp_path):
    settings.FRONTEND_DIST = tmp_path / "dist"
    return settings.FRONTEND_DIST


MANIFEST = {
    "index.html": {
        "file": "assets/index-4f2a9c.js",
        "src": "index.html",
        "isEntry": True,
        "css": ["assets/index-77b1d0.css"],
        "imports": ["_vendor-01ab.js"],
    },
    "_vendor-01ab.js": {"file": "assets/vendor-01ab.js", "css": ["assets/vendor-5e5e.css"]},
}


def test_dashboard_includes_the_built_assets(client, dist):
    write_manifest(dist, MANIFEST)

    response = client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert '<script type="module" src="/static/assets/index-4f2a9c.js"></script>' in html
    assert '<link rel="stylesheet" href="/static/assets/index-77b1d0.css">' in html
    assert '<link rel="stylesheet" href="/static/assets/vendor-5e5e.css">' in html
    assert '<link rel="modulepreload" href="/static/assets/vendor-01ab.js">' in html
    assert '<div id="app"' in html


def test_dashboard_passes_urls_and_sets_the_csrf_cookie(client, dist):
    write_manifest(dist, MANIFEST)

    response = client.get("/")

    html = response.content.decode()
    start = html.index('<script id="cairn-config" type="application/json">') + len(
        '<script id="cairn-config" type="application/json">'
    )
    config = json.loads(html[start : html.index("</script>", start)])
    assert config["apiRoot"] == "/api/v1/"
    assert config["loginUrl"] == "/admin/login/?next=%2F"
    assert config["logoutUrl"] == "/admin/logout/"
    # The dashboard sends this cookie back as X-CSRFToken when it stops a workload.
    assert "csrftoken" in response.cookies
    assert "no-cache" in response["Cache-Control"]


def test_dashboard_picks_up_a_rebuild(client, dist):
    write_manifest(dist, MANIFEST)
    assert "index-4f2a9c.js" in client.get("/").content.decode()

    rebuilt = {"index.html": {**MANIFEST["index.html"], "file": "assets/index-9d9d9d.js", "imports": []}}
    write_manifest(dist, rebuilt)
    path = dist / ".vite" / "manifest.json"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    html = client.get("/").content.decode()
    assert "index-9d9d9d.js" in html
    assert "index-4f2a9c.js" not in html


def test_dashboard_finds_an_entry_under_another_name(client, dist):
    write_manifest(dist, {"src/main.ts": {"file": "assets/main-1.js", "isEntry": True}})

    assert '<script type="module" src="/static/assets/main-1.js">' in client.get("/").content.decode()


def test_dashboard_without_a_build_says_to_run_make_run(client, dist):
    response = client.get("/")

    assert response.status_code == 503
    html = response.content.decode()
    assert "has not been built" in html
    assert "make run" in html
    assert "<script" not in html


def test_dashboard_with_a_broken_manifest_shows_the_helpful_page(client, dist):
    path = dist / ".vite" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")

    response = client.get("/")

    assert response.status_code == 503
    assert "make run" in response.content.decode()


def test_dashboard_page_is_served_to_signed_in_users_too(client, dist, alice):
    write_manifest(dist, MANIFEST)
    client.force_login(alice)

    assert client.get("/").status_code == 200


def test_healthz_answers_ok_without_authentication(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_refuses_writes(client):
    assert client.post("/healthz").status_code == 405


def test_healthz_reports_an_unreachable_database(client, monkeypatch):
    from apps.core import views

    class Unreachable:
        def cursor(self):
            raise OperationalError("connection refused")

    monkeypatch.setattr(views, "connection", Unreachable())

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["status"] == "error"


@pytest.mark.parametrize("path", ["/signin", "/projects/demo/workloads", "/projects/demo/workloads/training/3",
                                  "/cluster", "/tokens"])
def test_dashboard_routes_serve_the_app_on_reload(client, dist, path):
    write_manifest(dist, MANIFEST)
    response = client.get(path)
    assert response.status_code == 200
    assert b'id="app"' in response.content


def test_unknown_top_level_paths_are_still_404(client, dist):
    assert client.get("/projectsx").status_code == 404
    assert client.get("/nothing-here").status_code == 404
