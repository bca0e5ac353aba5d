"""Reading the audit log: a project's owners read their project's records; Cairn admins read
every project's, and the whole log at /api/v1/audit/."""
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.permissions import IsAdminUser, IsAuthenticated

from apps.accounts.permissions import TokenScopePermission
from apps.core.serializers import DetailSerializer
from apps.projects.api.base import ProjectScopedViewSet
from apps.projects.choices import Action

from ..filters import AuditEventFilter
from ..models import AuditEvent
from ..selectors import audit_events
from .serializers import AuditEventSerializer

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


class IsCairnAdmin(IsAdminUser):
    message = "Only Cairn administrators can read the whole audit log."


@extend_schema_view(list=extend_schema(
    summary="The whole audit log, newest first (Cairn admins)",
    responses={200: AuditEventSerializer(many=True), 400: DetailSerializer, 401: DetailSerializer,
               403: DetailSerializer},
))
class AuditEventViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Every record, sign-ins and token changes included (they belong to no project)."""

    queryset = AuditEvent.objects.all()
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter
    ordering_fields = ["time"]
    permission_classes = [IsAuthenticated, TokenScopePermission, IsCairnAdmin]

    def get_queryset(self):
        return audit_events()
