from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.serializers import StrictSerializer
from apps.projects.models import slug_validator

from ..models import PROFILE_FIELDS, Cluster, ClusterCredential, NetworkProfile, Node, ResourcePool
from ..networks import FORBIDDEN_KEYS, ProfileError, network_profile_clean


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


class NodeFreeSerializer(serializers.Serializer):
    """What the node's allocatable leaves Cairn once pods not Cairn's are counted."""

    gpu_milli = serializers.IntegerField()
    cpu_milli = serializers.IntegerField()
    memory_mb = serializers.IntegerField()


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    free_for_cairn = serializers.SerializerMethodField(
        help_text="The allocatable less the others_ requests: what Cairn's scheduler places work in "
                  "(and what submission checks a replica against).")

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "pool", "labels", "cpu_milli_capacity", "cpu_milli_allocatable",
                  "memory_mb_capacity", "memory_mb_allocatable", "accelerator_type", "cpu_arch", "gpu_count",
                  "gpu_model", "gpu_memory_mb", "others_gpu_milli", "others_cpu_milli", "others_memory_mb",
                  "free_for_cairn", "topology_domain", "health", "schedulable", "last_seen_at"]
        read_only_fields = fields

    @extend_schema_field(NodeFreeSerializer)
    def get_free_for_cairn(self, node: Node) -> dict:
        gpu_milli, cpu_milli, memory_mb = node.free_for_cairn()
        return {"gpu_milli": gpu_milli, "cpu_milli": cpu_milli, "memory_mb": memory_mb}


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


class NetworkProfileSerializer(serializers.ModelSerializer):
    """A network profile (apps/clusters/networks.py); every field checked by network_profile_clean,
    and fields a profile can never have (privileged, host_network, ...) refused by name."""

    pools = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)

    class Meta:
        model = NetworkProfile
        fields = ["id", "name", "description", "resources", "networks", "capabilities", "runtime_class_name",
                  "pod_security_level", "env", "pools", "created_at"]
        read_only_fields = ["id", "pools", "created_at"]

    def to_internal_value(self, data):
        if isinstance(data, dict):
            forbidden = {k: [f"A network profile cannot grant {what}."] for k, what in FORBIDDEN_KEYS.items() if k in data}
            unknown = set(data) - set(self.fields) - set(forbidden)
            if unknown:
                forbidden.update({k: ["Unknown field."] for k in sorted(unknown)})
            if forbidden:
                raise serializers.ValidationError(forbidden)
        return super().to_internal_value(data)

    def validate(self, attrs):
        current = {f: getattr(self.instance, f) for f in PROFILE_FIELDS} if self.instance else {}
        try:
            cleaned = network_profile_clean({**current, **{k: v for k, v in attrs.items() if k in PROFILE_FIELDS}})
        except ProfileError as exc:
            raise serializers.ValidationError({k: [v] for k, v in exc.errors.items()}) from None
        return {**attrs, **cleaned}
