from django.apps import AppConfig


class NotebooksConfig(AppConfig):
    name = "apps.notebooks"
    label = "notebooks"

    def ready(self) -> None:
        # Django requires these imports here: the registry is filled once the apps are loaded.
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        from .api.views import NotebookViewSet  # the kind's collection, routed by portal from the spec
        from .commands import bind_host, notebook_command, notebook_mounts, notebook_token_env
        from .selectors import notebook_endpoint

        register_kind(KindSpec(kind=Kind.NOTEBOOK, route="notebooks", label=Kind.NOTEBOOK.label, endpoint=notebook_endpoint,
                               lists_empty_runs=False, serves_port=True, access_token=True,
                               local_command=notebook_command, local_mounts=notebook_mounts, local_host=bind_host,
                               local_token_env=notebook_token_env, kubernetes_object="StatefulSet",
                               api_viewset=NotebookViewSet))
