"""A project's audit log at /api/v1/projects/<project>/audit/: the records of apps.audit, read
through the tenant-scoped viewset (so it lives here, above audit; the whole log stays in
apps/audit/api/views.py)."""
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins

from apps.audit.api.serializers import AuditEventSerializer
from apps.audit.filters import AuditEventFilter
from apps.audit.models import AuditEvent
from apps.audit.selectors import audit_events
from apps.core.serializers import DetailSerializer

from ..choices import Action
from .base import ProjectScopedViewSet

ERRORS = {400: DetailSerializer, 401: DetailSerializer, 403: DetailSerializer, 404: DetailSerializer}


@extend_schema_view(list=extend_schema(
    summary="The project's audit log, newest first (project owners and Cairn admins)",
    responses={200: AuditEventSerializer(many=True), **ERRORS},
))
class ProjectAuditEventViewSet(mixins.ListModelMixin, ProjectScopedViewSet):
    """Security-relevant actions in the project: membership and role changes, quota changes,
    notebook opens. Owners only: other members get 403, outsiders 404."""

    queryset = AuditEvent.objects.all()
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter
    ordering_fields = ["time"]
    required_actions = {"list": Action.READ_AUDIT}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AuditEvent.objects.none()
        return audit_events(project=self.project)
