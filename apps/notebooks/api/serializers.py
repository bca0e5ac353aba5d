from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import WorkloadCreateSerializer
from apps.workloads.choices import Kind


class NotebookCreateSerializer(IsolatedSpecMixin, WorkloadCreateSerializer):
    """A JupyterLab server (one replica), protected by a token. Not preemptible unless asked."""

    kind = Kind.NOTEBOOK
    default_preemptible = False
