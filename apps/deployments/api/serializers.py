from rest_framework import serializers

from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import CommandField, WorkloadCreateSerializer
from apps.workloads.choices import Kind


class DeploymentCreateSerializer(IsolatedSpecMixin, WorkloadCreateSerializer):
    """A serving command run as N replicas, each listening on $PORT."""

    kind = Kind.DEPLOYMENT
    default_preemptible = False

    command = CommandField(help_text="The serving command; it must listen on $PORT.")
    replicas = serializers.IntegerField(required=False, default=1, min_value=1, max_value=64)
    port = serializers.IntegerField(required=False, default=8000, min_value=1, max_value=65535,
                                    help_text="Container port (Kubernetes); locally $PORT is chosen free.")

    def build_spec(self, data):
        return {**super().build_spec(data), "command": data["command"], "port": data["port"]}
