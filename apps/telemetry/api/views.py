from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.serializers import DetailSerializer
from apps.projects.api.base import ProjectScopedViewSet
from apps.workloads.models import Workload

from ..overview import cluster_overview
from ..selectors import telemetry_metrics, telemetry_series
from .serializers import ClusterOverviewSerializer, SeriesQuerySerializer

ERRORS = {400: DetailSerializer, 401: DetailSerializer, 403: DetailSerializer, 404: DetailSerializer}


def _answer(*, node=None, workload_id=None, query_params):
    query = SeriesQuerySerializer(data=query_params.dict())
    query.is_valid(raise_exception=True)
    data = dict(query.validated_data)
    metric = data.pop("metric", None)
    if metric is None:  # without a metric: which metrics exist
        return Response({"metrics": telemetry_metrics(node=node, workload_id=workload_id)})
    return Response(telemetry_series(node=node, workload_id=workload_id, metric=metric, **data))


class NodeTelemetryView(APIView):
    """Samples of one node (CPU, memory, per-GPU utilisation, memory, temperature, power, ECC, XID).
    Like the node inventory, readable by every signed-in user."""

    @extend_schema(parameters=[SeriesQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS},
                   summary="Telemetry of a node: ?metric=gpu.util_percent&since=...&max_points=...")
    def get(self, request, node: str):
        return _answer(node=node, query_params=request.query_params)


class WorkloadTelemetryViewSet(ProjectScopedViewSet):
    """GPU telemetry attributed to one workload of the project (its pods' GPUs)."""

    queryset = Workload.objects.all()

    @extend_schema(parameters=[SeriesQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS},
                   summary="Telemetry of a workload: ?metric=gpu.util_percent&since=...")
    def retrieve(self, request, project=None, pk=None):
        workload = self.get_object()
        return _answer(workload_id=workload.pk, query_params=request.query_params)


class ClusterOverviewView(APIView):
    """Pools and nodes with GPU capacity, allocation and use, per GPU for the heatmap (docs/live.md).
    Like the node inventory, readable by every signed-in user; no workload of any project is named."""

    @extend_schema(responses={200: ClusterOverviewSerializer, 401: DetailSerializer},
                   summary="Cluster overview: pools, nodes and GPUs with capacity, allocation and latest use")
    def get(self, request):
        return Response(ClusterOverviewSerializer(cluster_overview()).data)
