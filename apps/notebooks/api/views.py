from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.projects.choices import Action, role_allows
from apps.workloads.api.serializers import WorkloadSerializer
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from ..selectors import notebook_activity, reclaimed_gpu_hours
from ..services import idle_timeout_of, notebook_start
from .serializers import NotebookCreateSerializer


class NotebookActivitySerializer(serializers.Serializer):
    running = serializers.BooleanField()
    idle_timeout = serializers.IntegerField(help_text="Seconds idle before Cairn stops it; 0: never.")
    idle_seconds = serializers.FloatField(allow_null=True, help_text="Idle for this long (null: not running).")
    active_at = serializers.DateTimeField(allow_null=True, help_text="Last moment it counted as active.")
    cull_at = serializers.DateTimeField(allow_null=True, help_text="When it is stopped if it stays idle; null: never.")
    checked_at = serializers.DateTimeField(allow_null=True, help_text="The culler's last look.")
    busy_kernels = serializers.IntegerField(allow_null=True)
    kernels = serializers.IntegerField(allow_null=True)
    connections = serializers.IntegerField(allow_null=True)
    gpu_utilisation = serializers.FloatField(allow_null=True, help_text="Percent, its busiest GPU; null: no telemetry.")
    summary = serializers.CharField(allow_blank=True)


class ReclaimedSerializer(serializers.Serializer):
    reclaims = serializers.IntegerField(help_text="Notebooks the idle culler stopped.")
    gpu_hours = serializers.FloatField(help_text="GPU-hours their GPUs were free because of it (until each was "
                                                 "started again, or now).")


class NotebookViewSet(KindWorkloadViewSet):
    """Notebooks are opened through Cairn's proxy at /nb/<project>/<id>/ (the workload's `endpoint`),
    not through the API (apps/notebooks/proxy.py)."""

    kind = Kind.NOTEBOOK
    create_serializer_class = NotebookCreateSerializer
    required_actions = {**KindWorkloadViewSet.required_actions, "start": Action.SUBMIT}

    @extend_schema(request=NotebookCreateSerializer, responses={201: WorkloadSerializer, **ERRORS})
    def create(self, request, project=None):
        return super().create(request, project)

    @extend_schema(request=None, responses={202: WorkloadSerializer, **ERRORS},
                   summary="Start a stopped notebook again (its files are kept)",
                   description="Its creator, or the project's owners and maintainers. The notebook goes back to "
                               "the queue as the same workload, with the same home folder.")
    @action(detail=True, methods=["post"])
    def start(self, request, project=None, pk=None):
        workload = self.get_object()
        creator = workload.created_by_id is not None and workload.created_by_id == request.user.pk
        if not creator and not role_allows(self.role, Action.MANAGE_MEMBERS):
            raise exceptions.PermissionDenied("Only the notebook's creator and the project's owners and maintainers "
                                              "can start it again.")
        workload = notebook_start(workload=workload, user=request.user)
        return Response(WorkloadSerializer(workload, context=self.get_serializer_context()).data,
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: NotebookActivitySerializer, **ERRORS},
                   summary="Idle time, culling deadline and GPU utilisation, as the idle culler last saw them")
    @action(detail=True, methods=["get"])
    def activity(self, request, project=None, pk=None):
        workload = self.get_object()
        return Response(NotebookActivitySerializer(
            notebook_activity(workload=workload, idle_timeout=idle_timeout_of(workload))).data)

    @extend_schema(responses={200: ReclaimedSerializer, **ERRORS},
                   summary="What the idle culler gave back in this project")
    @action(detail=False, methods=["get"])
    def reclaimed(self, request, project=None):
        found = reclaimed_gpu_hours(project_ids=[self.project.pk]).get(self.project.pk,
                                                                       {"reclaims": 0, "gpu_hours": 0.0})
        return Response(ReclaimedSerializer(found).data)
