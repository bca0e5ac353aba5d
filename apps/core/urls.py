"""Page routes (the API lives under /api/v1/, see apps/portal/api/urls.py)."""
from django.urls import path, re_path

from . import views

# Paths the dashboard routes itself (frontend/src/App.tsx): Django answers them with the
# same page so a reload or a shared link opens the right view.
DASHBOARD_ROUTES = r"^(?:signin|projects|cluster|tokens)(?:/.*)?$"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    re_path(DASHBOARD_ROUTES, views.dashboard, name="dashboard-route"),
    path("healthz", views.healthz, name="healthz"),
]
