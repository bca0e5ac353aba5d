"""Reading the whole audit log at /api/v1/audit/ (Cairn admins). A project's owners read their
project's records at /api/v1/projects/<project>/audit/, served by apps/projects/api/audit.py (it
needs the tenant-scoped viewset, and audit sits below projects)."""
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.permissions import IsAdminUser
from rest_framework.settings import api_settings

from apps.core.serializers import DetailSerializer

from ..filters import AuditEventFilter
from ..models import AuditEvent
from ..selectors import audit_events
from .serializers import AuditEventSerializer


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
    # The default classes (signed in, and the API token's scope: settings REST_FRAMEWORK, named
    # there so that audit, below accounts, imports no accounts code), then admins only.
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, IsCairnAdmin]

    def get_queryset(self):
        return audit_events()
