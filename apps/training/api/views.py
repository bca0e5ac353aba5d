from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.workloads.api.serializers import WorkloadSerializer
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from ..health import DEFAULT_HANG_TIMEOUT
from ..selectors import checkpoints_of, progress_of_attempt, project_goodput, workload_goodput
from .serializers import ProjectGoodputSerializer, ResilienceSerializer, TrainingJobCreateSerializer


class TrainingJobViewSet(KindWorkloadViewSet):
    kind = Kind.TRAINING
    create_serializer_class = TrainingJobCreateSerializer

    @extend_schema(request=TrainingJobCreateSerializer, responses={201: WorkloadSerializer, **ERRORS})
    def create(self, request, project=None):
        return super().create(request, project)

    @extend_schema(responses={200: ResilienceSerializer, **ERRORS},
                   summary="Self-healing of one job: goodput, checkpoints, each rank's progress, stragglers")
    @action(detail=True, methods=["get"])
    def resilience(self, request, project=None, pk=None):
        workload = self.get_object()
        spec = workload.spec or {}
        data = {
            "goodput": workload_goodput(workload),
            "checkpoints": checkpoints_of(workload_id=workload.pk)[-50:],
            "ranks": progress_of_attempt(workload_id=workload.pk, attempt=workload.attempt),
            "stragglers": [r for r in (workload.runtime or {}).get("stragglers", []) if isinstance(r, int)],
            "hang_timeout_seconds": spec.get("hang_timeout_seconds") or DEFAULT_HANG_TIMEOUT,
            "straggler_policy": spec.get("straggler_policy") or "alert",
        }
        return Response(ResilienceSerializer(data).data)

    @extend_schema(responses={200: ProjectGoodputSerializer, **ERRORS},
                   summary="The project's training goodput: productive / wall hours, GPU-hours lost to failures")
    @action(detail=False, methods=["get"])
    def goodput(self, request, project=None):
        return Response(ProjectGoodputSerializer(project_goodput(project_id=self.project.pk)).data)
