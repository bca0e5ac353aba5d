from rest_framework import serializers

from ..models import Cluster, Node, ResourcePool


class ClusterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["id", "name", "backend", "created_at"]
        read_only_fields = fields


class ResourcePoolSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = ResourcePool
        fields = ["id", "name", "cluster", "description", "accelerator_models", "node_selector", "topology_keys",
                  "created_at"]
        read_only_fields = fields


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "pool", "labels", "cpu_milli_capacity", "cpu_milli_allocatable",
                  "memory_mb_capacity", "memory_mb_allocatable", "gpu_count", "gpu_model", "gpu_memory_mb",
                  "topology_domain", "health", "schedulable", "last_seen_at"]
        read_only_fields = fields
