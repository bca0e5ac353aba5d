"""The tenant-scoped base viewset every project route builds on.

It resolves `{project}` from the URL, answers 404 to anyone who is not a member (so the
existence of other projects' objects never leaks), checks the caller's role against the
action, and scopes the queryset to the project. It fails closed: an unsafe action that a
subclass forgot to declare in `required_actions` is refused.
"""
from rest_framework import exceptions, permissions, viewsets

from apps.projects.choices import Action, role_allows
from apps.projects.models import Project
from apps.projects.selectors import membership_role


class ProjectScopedMixin:
    project_url_kwarg = "project"
    # DRF action name -> apps.projects.choices.Action. Safe methods default to READ.
    required_actions: dict[str, str] = {}

    project: Project
    role: str

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions, throttling
        slug = kwargs.get(self.project_url_kwarg)
        project = Project.objects.filter(slug=slug).first() if slug else None
        role = membership_role(user=request.user, project=project) if project else None
        if project is None or role is None:
            raise exceptions.NotFound("Project not found.")
        self.project, self.role = project, role
        needed = self.required_actions.get(self.action)
        if needed is None:
            if request.method not in permissions.SAFE_METHODS:
                raise exceptions.PermissionDenied("This action is not allowed.")
            needed = Action.READ
        if not role_allows(role, needed):
            raise exceptions.PermissionDenied(
                f"Your role in project '{project.slug}' is {role}; this needs {needed.replace('_', ' ')} rights."
            )

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request project
            return super().get_queryset().none()
        return super().get_queryset().filter(project=self.project)


class ProjectScopedViewSet(ProjectScopedMixin, viewsets.GenericViewSet):
    pass
