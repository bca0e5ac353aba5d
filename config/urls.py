from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.telemetry.metrics import MetricsView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("apps.core.api.urls")),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("", include("apps.core.urls")),
]

# Unknown URLs under /api/ answer the API's JSON {"detail": ...}; pages keep Django's 404 page.
handler404 = "apps.core.views.not_found"
