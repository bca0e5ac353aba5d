from rest_framework import serializers

from apps.clusters.backends import backend_spec
from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import WorkloadCreateSerializer
from apps.workloads.choices import Kind

from ..choices import IDE, MAX_IDLE_TIMEOUT_SECONDS
from ..commands import code_server_path


class NotebookCreateSerializer(IsolatedSpecMixin, WorkloadCreateSerializer):
    """An IDE server (one replica): JupyterLab, or VS Code in the browser (code-server), reached
    through Cairn's proxy at /nb/<project>/<id>/. Not preemptible unless asked."""

    kind = Kind.NOTEBOOK
    default_preemptible = False

    ide = serializers.ChoiceField(choices=IDE.choices, required=False, default=IDE.JUPYTERLAB,
                                  help_text="jupyterlab (default) or vscode (code-server).")
    idle_timeout = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_IDLE_TIMEOUT_SECONDS,
        help_text="Seconds idle (no busy kernel, GPUs under the threshold) before Cairn stops it; 0: never. "
                  "Default: the project's notebook_idle_timeout.")

    def validate_for_pool(self, pool) -> None:
        super().validate_for_pool(pool)
        # The local backend runs code-server from this server's disk (`make code-server`); without
        # it a vscode notebook could only fail at launch, so it is refused at submit instead.
        # Kubernetes pools run it from the notebook image.
        if (self.validated_data.get("ide") == IDE.VSCODE and backend_spec(pool.cluster.backend).runs_on_this_machine
                and code_server_path() is None):
            raise serializers.ValidationError({"ide": [
                f"VS Code (code-server) is not installed on this server, so pool '{pool.name}' cannot run a "
                "vscode notebook: choose jupyterlab, or ask an admin to run `make code-server` (docs/notebooks.md)."]})

    def build_spec(self, data: dict) -> dict:
        spec = super().build_spec(data)
        spec["ide"] = data.get("ide", IDE.JUPYTERLAB)
        if data.get("idle_timeout") is not None:
            spec["idle_timeout"] = data["idle_timeout"]
        return spec
