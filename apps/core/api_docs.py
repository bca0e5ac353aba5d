"""The API reference pages: Swagger UI at /api/docs/ and ReDoc at /api/redoc/, with their
scripts and styles served by Cairn itself (drf-spectacular-sidecar), so they work offline.

The schema they read (/api/schema/) is for signed-in users only; the pages are not. Without a
session they show a one-page placeholder reference that says how to sign in (and how to use a
token from scripts), instead of a plain-text 401 or a blank page."""
import json
from urllib.parse import urlencode

from django.conf import settings
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny


def signed_out_spec(request) -> dict:
    """An OpenAPI document with no paths whose description says how to sign in."""
    sign_in = f"/signin?{urlencode({'next': request.path})}"
    return {
        "openapi": "3.0.3",
        "info": {
            "title": settings.SPECTACULAR_SETTINGS["TITLE"],
            "version": settings.SPECTACULAR_SETTINGS["VERSION"],
            "description": (
                "**Sign in to read the reference.** It lists every endpoint to signed-in users only: "
                f"[sign in]({sign_in}) with your Cairn account (the dashboard's login) and you are "
                "brought back here.\n\n"
                "From scripts: exchange a password for an API token with `POST /api/v1/auth/login/` "
                "(`{\"username\": \"...\", \"password\": \"...\"}`), then send `Authorization: Bearer <token>`. "
                "The OpenAPI 3 schema itself is at `/api/schema/` (with that header)."
            ),
        },
        "paths": {},
    }


class ApiDocsView(SpectacularSwaggerView):
    permission_classes = [AllowAny]

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        if not request.user.is_authenticated:
            # Swagger UI takes `spec` when `url` is empty; these settings are spread last.
            shown = json.loads(response.data["settings"] or "{}")
            response.data["settings"] = json.dumps({**shown, "url": "", "spec": signed_out_spec(request)})
        return response


class ApiRedocView(SpectacularRedocView):
    permission_classes = [AllowAny]
    template_name = "api_docs/redoc.html"

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        response.data["spec"] = None if request.user.is_authenticated else signed_out_spec(request)
        # ReDoc's footer shows a logo from its vendor's CDN; images come from Cairn only.
        response["Content-Security-Policy"] = "img-src 'self' data:"
        return response
