"""Cluster inventory, readable by every signed-in user. Admins change it in the Django admin;
Kubernetes clusters are registered (and their connectivity checked) by admins over the API."""
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.response import Response

from apps.accounts.permissions import TokenScopePermission
from apps.core.errors import Conflict
from apps.core.serializers import DetailSerializer

from ..models import Cluster, NetworkProfile, Node, ResourcePool
from ..services import kubernetes_cluster_check, kubernetes_cluster_register
from .serializers import (
    ClusterCheckSerializer,
    ClusterSerializer,
    KubernetesClusterRegisterSerializer,
    KubernetesClusterSerializer,
    NetworkProfileSerializer,
    NodeSerializer,
    ResourcePoolSerializer,
)


class IsCairnAdmin(IsAdminUser):
    message = "Only Cairn administrators can register clusters or check their connection."


ADMIN_ONLY = [IsAuthenticated, TokenScopePermission, IsCairnAdmin]


class ClusterViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    filterset_fields = ["backend", "name"]

    @extend_schema(
        summary="Register a Kubernetes cluster (or replace its credentials)",
        request=KubernetesClusterRegisterSerializer,
        responses={201: KubernetesClusterSerializer, 400: DetailSerializer, 403: DetailSerializer,
                   409: DetailSerializer},
    )
    @action(detail=False, methods=["post"], url_path="register-kubernetes", permission_classes=ADMIN_ONLY)
    def register_kubernetes(self, request):
        serializer = KubernetesClusterRegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        cluster = kubernetes_cluster_register(**serializer.validated_data)
        cluster = Cluster.objects.select_related("credential").get(pk=cluster.pk)
        return Response(KubernetesClusterSerializer(cluster).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Check that Cairn reaches the cluster's API server with the stored credentials",
        request=ClusterCheckSerializer, responses={200: KubernetesClusterSerializer, 400: DetailSerializer, 403: DetailSerializer},
    )
    @action(detail=True, methods=["post"], url_path="check", permission_classes=ADMIN_ONLY)
    def check(self, request, pk=None):
        serializer = ClusterCheckSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        cluster = self.get_object()
        kubernetes_cluster_check(cluster=cluster, timeout=serializer.validated_data["timeout"])
        cluster = Cluster.objects.select_related("credential").get(pk=cluster.pk)
        return Response(KubernetesClusterSerializer(cluster).data)


class IsCairnAdminOrReadOnly(IsCairnAdmin):
    message = "Only Cairn administrators can change network profiles."

    def has_permission(self, request, view) -> bool:
        return request.method in ("GET", "HEAD", "OPTIONS") or super().has_permission(request, view)


class NetworkProfileViewSet(viewsets.ModelViewSet):
    """Network profiles (docs/kubernetes.md, "Network profiles"): readable by every signed-in user,
    created and changed by Cairn administrators; a pool uses one (set in the admin)."""

    queryset = NetworkProfile.objects.prefetch_related("pools")
    serializer_class = NetworkProfileSerializer
    permission_classes = [IsAuthenticated, TokenScopePermission, IsCairnAdminOrReadOnly]
    filterset_fields = ["name"]
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def perform_destroy(self, instance) -> None:
        if instance.pools.exists():
            raise Conflict(f"Network profile '{instance.name}' is used by pool(s) "
                           f"{', '.join(p.name for p in instance.pools.all())}: unset it there first.")
        instance.delete()


class ResourcePoolViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = ResourcePool.objects.select_related("cluster")
    serializer_class = ResourcePoolSerializer
    filterset_fields = ["name"]


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Node.objects.select_related("cluster", "pool")
    serializer_class = NodeSerializer
    filterset_fields = ["pool__name", "cluster__name", "health", "schedulable", "gpu_model"]
    ordering_fields = ["name", "gpu_count", "last_seen_at"]
