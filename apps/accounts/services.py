from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError

from .models import ApiToken, ApiTokenScope, User


def api_token_create(
    *, user: User, name: str, scopes: list[str] | None = None, expires_at: datetime | None = None,
    never_expires: bool = False,
) -> tuple[ApiToken, str]:
    """Create a token; return it and the full secret string, which is never stored or shown again."""
    if expires_at is None and not never_expires:
        expires_at = timezone.now() + timedelta(days=settings.CAIRN["TOKEN_DEFAULT_DAYS"])
    prefix, secret, full = ApiToken.generate()
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=prefix,
            secret_hash=ApiToken.hash_secret(secret),
            scopes=sorted(set(scopes or [ApiTokenScope.READ, ApiTokenScope.WRITE])),
            expires_at=expires_at,
        )
        audit_record(action=AuditAction.TOKEN_CREATE, actor=user, target=token,
                     details={"owner": user.username, "token_prefix": prefix, "scopes": token.scopes,
                              "expires_at": expires_at})
    return token, full


def api_token_login(*, user: User, token_name: str) -> tuple[ApiToken, str]:
    """A password sign-in that yields a new API token (`cairn login`): a sign-in and a token creation."""
    with transaction.atomic():
        token, full = api_token_create(user=user, name=token_name)
        audit_record(action=AuditAction.LOGIN, actor=user, target=user,
                     details={"method": "api_token", "token_prefix": token.prefix})
    return token, full


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is not None:
        raise ConflictError("This token is already revoked.")
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(action=AuditAction.TOKEN_REVOKE, target=token,
                     details={"owner": token.user.username, "token_prefix": token.prefix})
    return token


def api_token_change(*, token: ApiToken, fields: list[str]) -> ApiToken:
    """Save staff's edits of a token (name, scopes, expiry) from the admin."""
    allowed = {"name", "scopes", "expires_at"}
    changed = [name for name in fields if name in allowed]
    if not changed:
        return token
    with transaction.atomic():
        token.save(update_fields=changed)
        audit_record(action=AuditAction.TOKEN_CHANGE, target=token,
                     details={"owner": token.user.username, "token_prefix": token.prefix,
                              **{name: getattr(token, name) for name in changed}})
    return token
