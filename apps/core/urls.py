"""Page routes (the API lives under /api/v1/, see apps/core/api/urls.py)."""
from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("healthz", views.healthz, name="healthz"),
]
