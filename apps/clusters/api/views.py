"""Cluster inventory, readable by every signed-in user. Admins change it in the Django admin."""
from rest_framework import viewsets

from ..models import Cluster, Node, ResourcePool
from .serializers import ClusterSerializer, NodeSerializer, ResourcePoolSerializer


class ClusterViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    filterset_fields = ["backend", "name"]


class ResourcePoolViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = ResourcePool.objects.select_related("cluster")
    serializer_class = ResourcePoolSerializer
    filterset_fields = ["name"]


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Node.objects.select_related("cluster", "pool")
    serializer_class = NodeSerializer
    filterset_fields = ["pool__name", "cluster__name", "health", "schedulable", "gpu_model"]
    ordering_fields = ["name", "gpu_count", "last_seen_at"]
