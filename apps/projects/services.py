from collections.abc import Callable

from django.db import IntegrityError, transaction

from apps.accounts.models import User
from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError, ServiceError

from .choices import Action, Role, role_allows
from .models import Membership, Project


def project_create(*, slug: str, name: str, description: str = "", owner: User) -> Project:
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name, description=description)
            Membership.objects.create(project=project, user=owner, role=Role.OWNER)
            audit_record(action=AuditAction.PROJECT_CREATE, actor=owner, project=project, target=project,
                         details={"owner": owner.username})
    except IntegrityError:
        raise ConflictError(f"A project with slug '{slug}' already exists.") from None
    return project


def project_update(*, project: Project, **fields) -> Project:
    for key, value in fields.items():
        setattr(project, key, value)
    project.save(update_fields=list(fields))
    return project


# Apps above the kernel that own a project's work register a check here at AppConfig.ready():
# check(project) raises ConflictError while the project still has unfinished work of theirs.
# (projects sits below workloads and may not import it.)
project_delete_checks: list[Callable[[Project], None]] = []


def project_delete(*, project: Project) -> None:
    for check in project_delete_checks:
        check(project)
    with transaction.atomic():
        # Recorded first: deleting the project then clears the link, and the slug stays.
        audit_record(action=AuditAction.PROJECT_DELETE, project=project, target=project,
                     details={"members": sorted(project.memberships.values_list("user__username", flat=True))})
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
            membership = Membership.objects.create(project=project, user=user, role=role)
            _record(AuditAction.MEMBERSHIP_ADD, membership, {"role": role})
            return membership
    except IntegrityError:
        raise ConflictError(f"{user.username} is already a member of {project.slug}.") from None


def membership_change_role(*, membership: Membership, actor_role: str, role: str) -> Membership:
    _check_can_manage(actor_role=actor_role, role=membership.role)
    _check_can_manage(actor_role=actor_role, role=role)
    with transaction.atomic():
        if role != Role.OWNER:
            _ensure_an_owner_remains(membership=membership)
        old = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        if old != role:
            _record(AuditAction.MEMBERSHIP_ROLE_CHANGE, membership, {"from": old, "to": role})
    return membership


def membership_remove(*, membership: Membership, actor_role: str) -> None:
    _check_can_manage(actor_role=actor_role, role=membership.role)
    with transaction.atomic():
        _ensure_an_owner_remains(membership=membership)
        _record(AuditAction.MEMBERSHIP_REMOVE, membership, {"role": membership.role})
        membership.delete()


def _record(action: str, membership: Membership, details: dict) -> None:
    membership_record(action=action, project=membership.project, user=membership.user, details=details)


def membership_record(*, action: str, project: Project | None, user: User | None, details: dict) -> None:
    """One audit record per membership change: in the project, about the member. The services
    above call it; so does the Django admin, whose inline forms save memberships directly."""
    audit_record(action=action, project=project, target=user, details={"member": user.username if user else "", **details})
