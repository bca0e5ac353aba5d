from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "apps.workloads"
    label = "workloads"

    def ready(self) -> None:
        from apps.projects.services import project_delete_checks  # the seam projects offers

        from .services import project_has_no_unfinished_workloads

        project_delete_checks.append(project_has_no_unfinished_workloads)

        from .topics import register_topics  # the live topics workloads owns (apps.core.live)

        register_topics()
