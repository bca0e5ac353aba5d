"""Pages Django serves itself: the dashboard shell and the health check.

The dashboard is a static bundle built by Vite (frontend/). Vite writes
`frontend/dist/.vite/manifest.json`, which maps the entry to its hashed files; the
dashboard view reads it (cached until the file changes) to emit the script and CSS tags.
"""
import json
import logging
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)

# Manifest keys that name the dashboard's entry, in order of preference.
ENTRY_KEYS = ("index.html", "src/main.ts")

_manifest_cache: dict[Path, tuple[int, dict]] = {}


def _read_manifest(path: Path) -> dict | None:
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    cached = _manifest_cache.get(path)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        logger.warning("dashboard: cannot read the Vite manifest %s: %s", path, exc)
        return None
    if not isinstance(data, dict):
        logger.warning("dashboard: the Vite manifest %s is not a JSON object", path)
        return None
    _manifest_cache[path] = (mtime, data)
    return data


def frontend_assets() -> dict | None:
    """The built entry script, its CSS and the chunks to preload; None when there is no build."""
    manifest = _read_manifest(Path(settings.FRONTEND_DIST) / ".vite" / "manifest.json")
    if manifest is None:
        return None
    chunks = {key: chunk for key, chunk in manifest.items() if isinstance(chunk, dict)}
    entry = next((chunks[key] for key in ENTRY_KEYS if key in chunks), None)
    if entry is None:
        entry = next((chunk for chunk in chunks.values() if chunk.get("isEntry")), None)
    if entry is None or not entry.get("file"):
        return None

    css: list[str] = []
    preload: list[str] = []
    seen: set[str] = set()

    def collect(chunk: dict) -> None:
        # CSS of the entry and of everything it imports statically, in import order.
        for href in chunk.get("css", []):
            if href not in css:
                css.append(href)
        for key in chunk.get("imports", []):
            if key in seen or key not in chunks:
                continue
            seen.add(key)
            preload.append(chunks[key]["file"])
            collect(chunks[key])

    collect(entry)
    return {"script": entry["file"], "css": css, "preload": preload}


@require_safe
@never_cache
@ensure_csrf_cookie  # the dashboard sends the `csrftoken` cookie back as X-CSRFToken on writes
def dashboard(request: HttpRequest) -> HttpResponse:
    assets = frontend_assets()
    if assets is None:
        return render(request, "frontend_missing.html", status=503)
    config = {
        "apiRoot": reverse("me").removesuffix("me/"),
        "loginUrl": f"{reverse('admin:login')}?{urlencode({'next': request.path})}",
        "logoutUrl": reverse("admin:logout"),
        "adminUrl": reverse("admin:index"),
        "apiDocsUrl": reverse("api-docs"),
    }
    return render(request, "index.html", {"assets": assets, "config": config})


@require_safe
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and readiness: the process answers and the database does. Public on purpose."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.error("healthz: database check failed: %s", exc)
        return JsonResponse({"status": "error", "detail": "The database is not reachable."}, status=503)
    return JsonResponse({"status": "ok"})


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: URLs that match no route. Under /api/ the answer is the API's error body (a
    client reads JSON whatever the URL); elsewhere Django's own 404 page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)
