from rest_framework import serializers

from apps.backends.kubernetes.manifests import DEPLOYMENT_PORT
from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import CommandField, WorkloadCreateSerializer
from apps.workloads.choices import Kind


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
