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


class IsStaffOrReadOnly(permissions.BasePermission):
    """Cluster-wide objects (clusters, pools, nodes): everyone signed in reads, staff admins write."""

    message = "Only Cairn administrators can change this."

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        return bool(request.user and request.user.is_staff)
