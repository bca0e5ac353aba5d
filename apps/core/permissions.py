from rest_framework import permissions


class IsStaffOrReadOnly(permissions.BasePermission):
    """Cluster-wide objects (clusters, pools, nodes): everyone signed in reads, staff admins write."""

    message = "Only Cairn administrators can change this."

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        return bool(request.user and request.user.is_staff)
