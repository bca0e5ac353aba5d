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


def projects_for_me(user: User) -> list[dict]:
    """The projects `user` sees in /me/ (accounts asks through apps.accounts.selectors.user_projects):
    staff see every project as owner, others their memberships, by slug."""
    if user.is_staff:
        return [{"slug": p.slug, "name": p.name, "role": "owner"} for p in Project.objects.all()]
    return [
        {"slug": m.project.slug, "name": m.project.name, "role": m.role}
        for m in Membership.objects.filter(user=user).select_related("project").order_by("project__slug")
    ]
