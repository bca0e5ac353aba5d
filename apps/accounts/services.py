from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

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
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        secret_hash=ApiToken.hash_secret(secret),
        scopes=sorted(set(scopes or [ApiTokenScope.READ, ApiTokenScope.WRITE])),
        expires_at=expires_at,
    )
    return token, full


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is not None:
        raise ConflictError("This token is already revoked.")
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    return token
