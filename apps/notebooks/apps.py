from django.apps import AppConfig


class NotebooksConfig(AppConfig):
    name = "apps.notebooks"
    label = "notebooks"

    def ready(self) -> None:
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        from .commands import jupyterlab_command

        register_kind(KindSpec(kind=Kind.NOTEBOOK, serves_port=True, access_token=True,
                               local_command=jupyterlab_command, kubernetes_object="StatefulSet"))
