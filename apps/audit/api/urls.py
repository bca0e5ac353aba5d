"""Audit routes, included from apps/portal/api/urls.py (which also routes a project's audit log,
apps/projects/api/audit.py)."""
from django.urls import path

from .views import AuditEventViewSet

urlpatterns = [
    path("audit/", AuditEventViewSet.as_view({"get": "list"}), name="audit-list"),
]
