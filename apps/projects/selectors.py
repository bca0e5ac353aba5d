from django.db.models import QuerySet

from apps.accounts.models import User

from .models import Membership, Project


def membership_role(*, user: User, project: Project) -> str | None:
    """The user's role in the project, or None for outsiders. Staff count as owners."""
    if user.is_staff:
        return "owner"
    return Membership.objects.filter(user=user, project=project).values_list("role", flat=True).first()


def projects_visible_to(*, user: User) -> QuerySet[Project]:
    if user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)
