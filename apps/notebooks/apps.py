from django.apps import AppConfig


class NotebooksConfig(AppConfig):
    name = "apps.notebooks"
    label = "notebooks"

    def ready(self) -> None:
        # Django requires these imports here: the registry is filled once the apps are loaded.
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        from .commands import bind_host, notebook_command, notebook_mounts, notebook_token_env

        register_kind(KindSpec(kind=Kind.NOTEBOOK, serves_port=True, access_token=True,
                               local_command=notebook_command, local_mounts=notebook_mounts, local_host=bind_host,
                               local_token_env=notebook_token_env, kubernetes_object="StatefulSet"))
