from rest_framework import serializers

from apps.core.serializers import StrictSerializer
from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import CommandField, WorkloadCreateSerializer, WorkloadSerializer
from apps.workloads.choices import Kind

from ..conf import DEPLOYMENT_PORT
from ..models import KEY_PREFIX, DeploymentKey
from ..selectors import deployment_gateway_url


class DeploymentCreateSerializer(IsolatedSpecMixin, WorkloadCreateSerializer):
    """A serving command run as N replicas, each listening on $PORT."""

    kind = Kind.DEPLOYMENT
    default_preemptible = False

    command = CommandField(help_text="The serving command; it must listen on the port given in $PORT "
                                     "(locally on 127.0.0.1, on Kubernetes on every address).")
    replicas = serializers.IntegerField(required=False, default=1, min_value=1, max_value=64)
    port = serializers.IntegerField(
        required=False, default=DEPLOYMENT_PORT, min_value=1, max_value=65535,
        help_text=f"Kubernetes only: the container port, also passed as $PORT (default {DEPLOYMENT_PORT}); the "
                  "Service answers on port 80. The local backend ignores it: each replica gets a free port "
                  "chosen by Cairn in $PORT. Listen on $PORT and the same command works on both.")

    def build_spec(self, data):
        return {**super().build_spec(data), "command": data["command"], "port": data["port"]}


class DeploymentSerializer(WorkloadSerializer):
    """A deployment as the API shows it: a workload plus the URL to call it through Cairn."""

    gateway_url = serializers.SerializerMethodField(
        help_text="Call the deployment here, with a project member's API token or a deployment key "
                  "(docs/deployments.md).")

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "gateway_url"]
        read_only_fields = fields

    def get_gateway_url(self, obj) -> str:
        return deployment_gateway_url(obj) or ""

    def get_endpoint(self, obj) -> str | None:
        """For whoever may call it while it runs: the gateway, whatever backend serves it."""
        return self.get_gateway_url(obj) if super().get_endpoint(obj) else None


class DeploymentKeySerializer(serializers.ModelSerializer):
    display = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = DeploymentKey
        fields = ["id", "name", "prefix", "display", "created_by", "created_at", "last_used_at", "revoked_at", "active"]
        read_only_fields = fields

    def get_display(self, obj: DeploymentKey) -> str:
        return f"{KEY_PREFIX}{obj.prefix}_…"


class DeploymentKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)


class DeploymentKeyCreatedSerializer(DeploymentKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The secret key. Shown once, never again.")

    class Meta(DeploymentKeySerializer.Meta):
        fields = [*DeploymentKeySerializer.Meta.fields, "key"]
        read_only_fields = fields
