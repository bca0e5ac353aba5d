from rest_framework import permissions

from apps.accounts.models import ApiToken


class TokenScopePermission(permissions.BasePermission):
    """API tokens without the `write` scope may only read."""

    message = "This API token is read-only (it lacks the 'write' scope)."

    def has_permission(self, request, view):
        token = request.auth
        if isinstance(token, ApiToken) and request.method not in permissions.SAFE_METHODS:
            return token.allows("write")
        return True
