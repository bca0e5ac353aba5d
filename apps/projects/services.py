from django.db import IntegrityError, transaction

from apps.accounts.models import User
from apps.core.errors import ConflictError, ServiceError
from apps.workloads.choices import TERMINAL

from .choices import Action, Role, role_allows
from .models import Membership, Project


def project_create(*, slug: str, name: str, description: str = "", owner: User) -> Project:
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name, description=description)
            Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    except IntegrityError:
        raise ConflictError(f"A project with slug '{slug}' already exists.") from None
    return project


def project_update(*, project: Project, **fields) -> Project:
    for key, value in fields.items():
        setattr(project, key, value)
    project.save(update_fields=list(fields))
    return project


def project_delete(*, project: Project) -> None:
    if project.workloads.exclude(status__in=TERMINAL).exists():
        raise ConflictError("The project still has unfinished workloads; stop them first.")
    project.delete()


def _check_can_manage(*, actor_role: str, role: str) -> None:
    if role == Role.OWNER and not role_allows(actor_role, Action.MANAGE_OWNERS):
        raise ServiceError("Only owners can grant, change or revoke the owner role.", status_code=403)


def _ensure_an_owner_remains(*, membership: Membership) -> None:
    if membership.role == Role.OWNER and not membership.project.memberships.filter(role=Role.OWNER).exclude(
        pk=membership.pk
    ).exists():
        raise ConflictError("A project must keep at least one owner.")


def membership_add(*, project: Project, actor_role: str, user: User, role: str) -> Membership:
    _check_can_manage(actor_role=actor_role, role=role)
    try:
        with transaction.atomic():
            return Membership.objects.create(project=project, user=user, role=role)
    except IntegrityError:
        raise ConflictError(f"{user.username} is already a member of {project.slug}.") from None


def membership_change_role(*, membership: Membership, actor_role: str, role: str) -> Membership:
    _check_can_manage(actor_role=actor_role, role=membership.role)
    _check_can_manage(actor_role=actor_role, role=role)
    with transaction.atomic():
        if role != Role.OWNER:
            _ensure_an_owner_remains(membership=membership)
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def membership_remove(*, membership: Membership, actor_role: str) -> None:
    _check_can_manage(actor_role=actor_role, role=membership.role)
    with transaction.atomic():
        _ensure_an_owner_remains(membership=membership)
        membership.delete()
