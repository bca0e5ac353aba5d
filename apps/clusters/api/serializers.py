from rest_framework import serializers

from apps.core.serializers import StrictSerializer
from apps.projects.models import slug_validator

from ..models import Cluster, ClusterCredential, Node, ResourcePool


class ClusterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["id", "name", "backend", "created_at"]
        read_only_fields = fields


class ResourcePoolSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    allowed_paths = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="Absolute directories a workload on this pool may use as its working_dir besides its own folder "
                  "(local clusters; set by a Cairn admin).",
    )

    class Meta:
        model = ResourcePool
        fields = ["id", "name", "cluster", "description", "accelerator_models", "accelerator_types", "architectures",
                  "node_selector", "topology_keys", "allowed_paths", "outbound_access", "locality_wait_seconds",
                  "created_at"]
        read_only_fields = fields


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "pool", "labels", "cpu_milli_capacity", "cpu_milli_allocatable",
                  "memory_mb_capacity", "memory_mb_allocatable", "accelerator_type", "cpu_arch", "gpu_count",
                  "gpu_model", "gpu_memory_mb",
                  "topology_domain", "health", "schedulable", "last_seen_at"]
        read_only_fields = fields


class KubernetesClusterRegisterSerializer(StrictSerializer):
    name = serializers.CharField(max_length=40, validators=[slug_validator])
    kubeconfig = serializers.CharField(required=False, allow_blank=False, max_length=262144, trim_whitespace=False,
                                       help_text="Kubeconfig YAML. Stored encrypted; never returned.")
    context = serializers.CharField(required=False, default="", allow_blank=True, max_length=253)
    in_cluster = serializers.BooleanField(required=False, default=False,
                                          help_text="Use the service account of the pod Cairn runs in.")
    config = serializers.DictField(required=False, default=dict, help_text="Backend options, see docs/kubernetes.md.")

    def validate(self, attrs):
        if bool(attrs.get("kubeconfig")) == bool(attrs.get("in_cluster")):
            raise serializers.ValidationError({"kubeconfig": ["Give either a kubeconfig or in_cluster=true."]})
        return attrs


class ClusterCredentialSerializer(serializers.ModelSerializer):
    class Meta:
        model = ClusterCredential
        fields = ["source", "server", "context", "checked_at", "check_ok", "check_detail", "updated_at"]
        read_only_fields = fields


class KubernetesClusterSerializer(serializers.ModelSerializer):
    """A Kubernetes cluster as its registration shows it: options and the credential's summary, no secret."""

    credential = ClusterCredentialSerializer(read_only=True)

    class Meta:
        model = Cluster
        fields = ["id", "name", "backend", "config", "credential", "created_at"]
        read_only_fields = fields


class ClusterCheckSerializer(StrictSerializer):
    """The check uses the stored credentials; only how long to wait can be chosen."""

    timeout = serializers.IntegerField(required=False, default=10, min_value=1, max_value=60,
                                       help_text="Seconds to wait for the API server.")
