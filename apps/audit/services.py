"""Writing to the audit log. Call `audit_record` inside the transaction of the action it records,
so an action that rolls back leaves no record."""
import re
from typing import Any

from django.db.models import Model
from django.http import HttpRequest

from .choices import AuditAction
from .context import client_ip, current_request, user_agent
from .models import AuditEvent

# Keys that must never carry a value into the log (defence in depth: callers should not pass them).
_SECRET_KEY = re.compile(r"password|secret|kubeconfig|credential|^token$|private|api_key", re.IGNORECASE)
REDACTED = "[redacted]"


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): REDACTED if _SECRET_KEY.search(str(k)) else _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def audit_record(
    *,
    action: AuditAction | str,
    actor=None,
    project=None,
    target: Model | None = None,
    target_type: str = "",
    target_id: str | int = "",
    target_repr: str = "",
    details: dict | None = None,
    request: HttpRequest | None = None,
) -> AuditEvent:
    """Record one security-relevant action.

    `actor` defaults to the signed-in user of the current request (none outside a request);
    the source address and user agent come from `request` or the current request.
    `target` (a model instance) fills target_type/id/repr unless they are given.
    """
    action = AuditAction(action)
    request = request if request is not None else current_request()
    if actor is None and request is not None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            actor = user
    if target is not None:
        target_type = target_type or target._meta.label_lower
        target_id = target_id or target.pk
        target_repr = target_repr or str(target)
    return AuditEvent.objects.create(
        action=action,
        actor=actor,
        actor_username=actor.get_username() if actor is not None else "",
        project=project,
        project_slug=project.slug if project is not None else "",
        target_type=str(target_type)[:64],
        target_id="" if target_id is None else str(target_id)[:64],
        target_repr=str(target_repr)[:255],
        source_ip=client_ip(request) if request is not None else None,
        user_agent=user_agent(request) if request is not None else "",
        details=_scrub(details or {}),
    )
