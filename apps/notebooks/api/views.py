from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError
from apps.workloads.api.serializers import WorkloadSerializer
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from ..selectors import notebook_login_url
from .serializers import NotebookCreateSerializer


class NotebookViewSet(KindWorkloadViewSet):
    kind = Kind.NOTEBOOK
    create_serializer_class = NotebookCreateSerializer

    @extend_schema(request=NotebookCreateSerializer, responses={201: WorkloadSerializer, **ERRORS})
    def create(self, request, project=None):
        return super().create(request, project)

    @extend_schema(
        request=None,
        responses={302: OpenApiResponse(description="Redirect to the running notebook, logged in."), **ERRORS},
        summary="Open the notebook (its creator only)",
        description="Redirects the creator's browser to the running JupyterLab, logged in. Anyone else gets a "
                    "403: Cairn does not proxy notebooks yet, and whoever can reach a notebook can run code in it. "
                    "The workload's `endpoint` is this link, shown to the creator only.",
    )
    @action(detail=True, methods=["get"], url_path="open")
    def open(self, request, project=None, pk=None):
        workload = self.get_object()
        if workload.created_by_id is None or workload.created_by_id != request.user.pk:
            raise exceptions.PermissionDenied("Only the notebook's creator can open it.")
        url = notebook_login_url(workload=workload)
        if url is None:
            raise ConflictError(f"Notebook '{workload.name}' is {workload.status}, not running: nothing to open.")
        audit_record(action=AuditAction.NOTEBOOK_OPEN, project=workload.project, target=workload,
                     details={"attempt": workload.attempt})
        return Response(status=302, headers={"Location": url, "Cache-Control": "no-store",
                                             "Referrer-Policy": "no-referrer"})
