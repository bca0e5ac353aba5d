from drf_spectacular.utils import extend_schema

from apps.workloads.api.serializers import WorkloadSerializer
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from .serializers import DeploymentCreateSerializer


class DeploymentViewSet(KindWorkloadViewSet):
    kind = Kind.DEPLOYMENT
    create_serializer_class = DeploymentCreateSerializer

    @extend_schema(request=DeploymentCreateSerializer, responses={201: WorkloadSerializer, **ERRORS})
    def create(self, request, project=None):
        return super().create(request, project)
