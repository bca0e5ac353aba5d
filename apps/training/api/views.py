from drf_spectacular.utils import extend_schema

from apps.workloads.api.serializers import WorkloadSerializer
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from .serializers import TrainingJobCreateSerializer


class TrainingJobViewSet(KindWorkloadViewSet):
    kind = Kind.TRAINING
    create_serializer_class = TrainingJobCreateSerializer

    @extend_schema(request=TrainingJobCreateSerializer, responses={201: WorkloadSerializer, **ERRORS})
    def create(self, request, project=None):
        return super().create(request, project)
