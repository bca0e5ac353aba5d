from django.contrib import admin
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from apps.core.api_docs import ApiDocsView, ApiRedocView
from apps.telemetry.metrics import MetricsView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", ApiRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api/v1/", include("apps.portal.api.urls")),
    path("metrics", MetricsView.as_view(), name="metrics"),
    # Browsers ask for /favicon.ico on pages that do not link an icon (admin, API docs).
    path("favicon.ico", lambda request: HttpResponsePermanentRedirect(static("cairn/favicon.svg")), name="favicon"),
    path("", include("apps.core.urls")),
]

# Unknown URLs under /api/ answer the API's JSON {"detail": ...}; pages keep Django's 404 page.
handler404 = "apps.core.views.not_found"
