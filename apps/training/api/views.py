from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.projects.api.base import ProjectScopedViewSet
from apps.workloads.api.serializers import WorkloadSerializer
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind
from apps.workloads.models import Workload

from ..selectors import project_goodput, workload_resilience
from .serializers import ProjectGoodputSerializer, ResilienceSerializer, TrainingJobCreateSerializer


class TrainingJobViewSet(KindWorkloadViewSet):
    kind = Kind.TRAINING
    create_serializer_class = TrainingJobCreateSerializer

    @extend_schema(request=TrainingJobCreateSerializer, responses={201: WorkloadSerializer, **ERRORS})
    def create(self, request, project=None):
        return super().create(request, project)

    @extend_schema(responses={200: ProjectGoodputSerializer, **ERRORS},
                   summary="The project's training goodput: productive / wall hours, GPU-hours lost to failures")
    @action(detail=False, methods=["get"])
    def goodput(self, request, project=None):
        return Response(ProjectGoodputSerializer(project_goodput(project_id=self.project.pk)).data)


class WorkloadResilienceViewSet(ProjectScopedViewSet):
    """`/workloads/<id>/resilience/`: beside the kind-independent workload routes, so the workload
    page reads it for every kind; the data is the training app's (checkpoints, progress)."""

    queryset = Workload.objects.all()

    @extend_schema(
        parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="The workload's id.")],
        responses={200: ResilienceSerializer, **ERRORS},
        summary="Self-healing of one workload: goodput, checkpoints, each rank's progress, restarts",
        description="Any kind (docs/training.md, \"Goodput\"): a workload that does not run to completion, or whose "
                    "replicas do not report progress with the cairn SDK, answers an empty goodput (null), no ranks, "
                    "no checkpoints and no restarts.",
    )
    def retrieve(self, request, project=None, pk=None):
        return Response(ResilienceSerializer(workload_resilience(self.get_object())).data)
