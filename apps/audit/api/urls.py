"""Audit routes, included from apps/portal/api/urls.py."""
from django.urls import path

from .views import AuditEventViewSet, ProjectAuditEventViewSet

urlpatterns = [
    path("audit/", AuditEventViewSet.as_view({"get": "list"}), name="audit-list"),
    path("projects/<str:project>/audit/", ProjectAuditEventViewSet.as_view({"get": "list"}),
         name="project-audit-list"),
]
