from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.errors import ServiceError
from apps.core.serializers import DetailSerializer, StrictSerializer
from apps.projects.api.base import ProjectScopedViewSet
from apps.projects.choices import Action

from ..filters import WorkloadFilter
from ..kinds import kind_route, kind_spec, registered_kinds
from ..logs import LogsUnavailable, log_access
from ..models import Workload
from ..resubmission import workload_resubmit
from ..services import workload_delete, workload_stop, workload_submit, workload_validate_pool
from .logtail import follow_log
from .serializers import NAME_RE, EventSerializer, LogQuerySerializer, WorkloadCreateSerializer, WorkloadSerializer

ERRORS = {400: DetailSerializer, 401: DetailSerializer, 403: DetailSerializer, 404: DetailSerializer,
          409: DetailSerializer}


class ResubmitSerializer(StrictSerializer):
    name = serializers.RegexField(NAME_RE, required=False, max_length=63, error_messages={
        "invalid": "Use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit."},
        help_text="The new workload's name; default: the next free `<name>-<n>`.")


class PlainTextRenderer(BaseRenderer):
    """Lets clients ask for logs with `Accept: text/plain` (errors then come as plain text too)."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict) and "detail" in data:
            return f"{data['detail']}\n".encode()
        return str(data).encode()


class WorkloadActionsMixin:
    """Stop, events and logs of one workload: the same actions (and answers) on the
    kind-independent /workloads/{id}/ and on each kind's collection."""

    required_actions = {"stop": Action.SUBMIT, "resubmit": Action.SUBMIT}

    def get_serializer_class(self):
        if self.action == "events":
            return EventSerializer
        return super().get_serializer_class()

    @extend_schema(request=None, responses={202: WorkloadSerializer, **ERRORS},
                   summary="Stop: SIGTERM, then SIGKILL after the grace period")
    @action(detail=True, methods=["post"])
    def stop(self, request, project=None, pk=None):
        workload = workload_stop(workload=self.get_object(), user=request.user)
        return Response(WorkloadSerializer(workload, context=self.get_serializer_context()).data,
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ResubmitSerializer, responses={201: WorkloadSerializer, **ERRORS},
                   summary="Run again: a new workload with the same spec, linked to this ended one",
                   description="Only an ended workload (succeeded, failed, stopped, lost); 409 otherwise. The new "
                               "workload is queued with the same kind, pool, spec, resources, priority and limits, "
                               "named `name` or the next free `<name>-<n>`; its `resubmitted_from` is this one, "
                               "which keeps its own history (docs/training.md, \"Run again\").")
    @action(detail=True, methods=["post"])
    def resubmit(self, request, project=None, pk=None):
        workload = self.get_object()
        body = ResubmitSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        new = workload_resubmit(workload=workload, user=request.user, name=body.validated_data.get("name", ""))
        return Response(WorkloadSerializer(new, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: EventSerializer(many=True), **ERRORS}, summary="The workload's event trail")
    @action(detail=True, methods=["get"])
    def events(self, request, project=None, pk=None):
        workload = self.get_object()
        page = self.paginate_queryset(workload.events.all())
        return self.get_paginated_response(EventSerializer(page, many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("replica", int, description="Replica index (default 0)."),
            OpenApiParameter("attempt", int, description="Attempt number (default: the latest)."),
            OpenApiParameter("tail", int, description="Only the last N lines."),
            OpenApiParameter("follow", bool, description="Stream new output until the workload finishes."),
        ],
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR), **ERRORS,
                   503: OpenApiResponse(DetailSerializer, description="The backend's control plane (the Kubernetes "
                                        "API) kept failing; try again.")},
        summary="Logs of one replica",
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, PlainTextRenderer])
    def logs(self, request, project=None, pk=None):
        workload = self.get_object()
        query = LogQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = query.validated_data
        if params["replica"] >= workload.replicas:
            raise ServiceError(f"Replica {params['replica']} does not exist; this workload has {workload.replicas}.")
        if params.get("attempt") and params["attempt"] > max(workload.attempt, 1):
            raise ServiceError(f"Attempt {params['attempt']} does not exist; the latest is {workload.attempt}.")
        kwargs = {"replica": params["replica"], "attempt": params.get("attempt"), "tail": params.get("tail")}
        if params["follow"]:
            # An async generator: under ASGI each piece is sent as it is read (a synchronous one
            # would be collected whole), and a client that goes away cancels it.
            response = StreamingHttpResponse(follow_log(workload_id=workload.pk, **kwargs),
                                             content_type="text/plain; charset=utf-8")
            response["X-Accel-Buffering"] = "no"
            response["Cache-Control"] = "no-cache"
            return response
        try:
            text = log_access["read"](workload=workload, **kwargs)
        except LogsUnavailable as exc:
            raise ServiceError(f"The log could not be read just now: {exc}", status_code=503) from None
        return HttpResponse(text, content_type="text/plain; charset=utf-8")


class WorkloadReadViewSet(WorkloadActionsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          ProjectScopedViewSet):
    """Every workload of the project, all kinds together: list, inspect, stop, events and logs
    (creating and deleting go through the kind's own collection)."""

    queryset = Workload.objects.select_related("project", "pool", "created_by")
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilter
    ordering_fields = ["created_at", "name", "priority", "status", "started_at", "finished_at"]
    ordering = ["-created_at", "-id"]


class KindWorkloadViewSet(WorkloadActionsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """Create, list, inspect, stop and delete workloads of one kind. Subclasses set the kind."""

    kind: str = ""
    create_serializer_class: type[WorkloadCreateSerializer] = WorkloadCreateSerializer
    queryset = Workload.objects.select_related("project", "pool", "created_by")
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilter
    ordering_fields = ["created_at", "name", "priority", "status", "started_at", "finished_at"]
    ordering = ["-created_at", "-id"]
    required_actions = {**WorkloadActionsMixin.required_actions, "create": Action.SUBMIT, "destroy": Action.SUBMIT}

    def get_queryset(self):
        return super().get_queryset().filter(kind=self.kind)

    def get_serializer_class(self):
        if self.action == "create":
            return self.create_serializer_class
        return super().get_serializer_class()

    def create(self, request, project=None):
        serializer = self.create_serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        pool = workload_validate_pool(project=self.project, pool_name=serializer.validated_data.get("pool"))
        serializer.validate_for_pool(pool)
        workload = workload_submit(project=self.project, pool=pool, created_by=request.user,
                                   **serializer.to_submission())
        return Response(WorkloadSerializer(workload, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete a finished workload")
    def destroy(self, request, project=None, pk=None):
        workload_delete(workload=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkloadKindSerializer(serializers.Serializer):
    kind = serializers.CharField()
    label = serializers.CharField()
    route = serializers.CharField(help_text="The kind's collection under /api/v1/projects/<slug>/.")
    runs_to_completion = serializers.BooleanField(help_text="Runs end (training); the others are services kept up.")
    serves_port = serializers.BooleanField(help_text="Replicas listen on a port and the workload has a URL.")
    independent_replicas = serializers.BooleanField(help_text="Replicas are restarted alone and may be scaled.")


class KindListView(APIView):
    """The workload kinds this server runs, so clients (SDK, CLI, dashboard) keep no list of them."""

    @extend_schema(responses={200: WorkloadKindSerializer(many=True), 401: DetailSerializer}, summary="Workload kinds")
    def get(self, request):
        rows = [{"kind": spec.kind, "label": spec.label or spec.kind, "route": kind_route(spec.kind),
                 "runs_to_completion": spec.runs_to_completion, "serves_port": spec.serves_port,
                 "independent_replicas": spec.independent_replicas}
                for spec in map(kind_spec, registered_kinds())]
        return Response(WorkloadKindSerializer(rows, many=True).data)
