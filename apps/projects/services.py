from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError, ServiceError

from .choices import Action, Role, role_allows
from .models import IdempotencyKey, Membership, Project


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


# -- idempotent creation -------------------------------------------------------------------------

IDEMPOTENCY_KEY_TTL_HOURS = 24


@dataclass(frozen=True)
class IdempotentReplay:
    """The first answer to a request with the same key and the same content: send it again."""

    status_code: int
    response: object


def idempotency_key_claim(*, project: Project, user: User, key: str, fingerprint: str) -> IdempotencyKey | IdempotentReplay:
    """Claim `key` for this request, inside the request's transaction (the caller's `atomic`).

    A concurrent request with the same key blocks on the unique index until this one commits,
    then gets the first answer. Returns the new row (fill it with `idempotency_key_complete`),
    or the replay of an earlier answer; raises a 422 for the same key with a different request.
    """
    if not key or len(key) > 255 or not key.isprintable():
        raise ServiceError("Idempotency-Key must be 1 to 255 printable characters.")
    try:
        with transaction.atomic():
            return IdempotencyKey.objects.create(project=project, user=user, key=key, fingerprint=fingerprint)
    except IntegrityError:
        pass
    first = IdempotencyKey.objects.filter(project=project, key=key).first()
    if first is None or first.status_code is None:  # pruned or rolled back meanwhile: rare; let the client retry
        raise ConflictError("A request with this Idempotency-Key is in progress; retry it.")
    if first.fingerprint != fingerprint or first.user_id != user.pk:
        raise ServiceError(
            f"Idempotency-Key {key!r} was already used in project '{project.slug}' for a different request "
            "(another body, route or user). Use a new key for a new request.", status_code=422)
    return IdempotentReplay(status_code=first.status_code, response=first.response)


def idempotency_key_complete(*, claim: IdempotencyKey, status_code: int, response: object) -> None:
    IdempotencyKey.objects.filter(pk=claim.pk).update(status_code=status_code, response=response)


def idempotency_keys_prune(*, now=None) -> int:
    """Forget keys older than IDEMPOTENCY_KEY_TTL_HOURS (the platform's hourly housekeeping)."""
    cutoff = (now or timezone.now()) - timedelta(hours=IDEMPOTENCY_KEY_TTL_HOURS)
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=cutoff).delete()
    return deleted
