from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "apps.projects"
    label = "projects"

    def ready(self) -> None:
        # The seam accounts offers (accounts may not import projects): the projects shown in /me/.
        from apps.accounts.selectors import user_projects_readers

        from .selectors import projects_for_me

        user_projects_readers.append(projects_for_me)
