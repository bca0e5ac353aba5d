from .models import TOKEN_PREFIX, ApiToken, User


def user_from_token(token: str) -> User | None:
    """The active user behind a full API token string, or None."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    prefix, _, secret = token[len(TOKEN_PREFIX):].partition("_")
    api_token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if api_token is None or not api_token.matches(secret) or not api_token.is_active:
        return None
    return api_token.user if api_token.user.is_active else None
