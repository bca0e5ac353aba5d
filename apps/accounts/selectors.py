from collections.abc import Callable

from .models import TOKEN_PREFIX, ApiToken, User

# The projects a user sees in /me/ and at sign-in, as [{"slug", "name", "role"}]: read by
# apps.projects (memberships), which fills this at AppConfig.ready; accounts sits below projects.
user_projects_readers: list[Callable[[User], list[dict]]] = []


def user_projects(user: User) -> list[dict]:
    """The projects of `user` for /me/: what the readers apps.projects registers say."""
    return [project for read in user_projects_readers for project in read(user)]


def api_token_find(token: str) -> ApiToken | None:
    """The ApiToken whose prefix and secret match the full token string, active or not."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    prefix, _, secret = token[len(TOKEN_PREFIX):].partition("_")
    if not prefix or not secret:
        return None
    api_token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if api_token is None or not api_token.matches(secret):
        return None
    return api_token


def user_from_token(token: str) -> User | None:
    """The active user behind an active full API token string, or None."""
    api_token = api_token_find(token)
    if api_token is None or not api_token.is_active or not api_token.user.is_active:
        return None
    return api_token.user
