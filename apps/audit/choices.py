from django.db import models


class AuditAction(models.TextChoices):
    """What the audit log records. Dotted names: `<subject>.<verb>`. docs/permissions.md lists them."""

    LOGIN = "auth.login", "Signed in"
    LOGIN_FAILED = "auth.login_failed", "Failed sign-in"
    LOGOUT = "auth.logout", "Signed out"
    TOKEN_CREATE = "token.create", "API token created"
    TOKEN_CHANGE = "token.change", "API token changed"
    TOKEN_REVOKE = "token.revoke", "API token revoked"
    USER_CREATE = "user.create", "User created"
    USER_CHANGE = "user.change", "User changed"
    USER_DELETE = "user.delete", "User deleted"
    PROJECT_CREATE = "project.create", "Project created"
    PROJECT_DELETE = "project.delete", "Project deleted"
    MEMBERSHIP_ADD = "membership.add", "Member added"
    MEMBERSHIP_ROLE_CHANGE = "membership.role_change", "Member's role changed"
    MEMBERSHIP_REMOVE = "membership.remove", "Member removed"
    QUOTA_CREATE = "quota.create", "Quota created"
    QUOTA_CHANGE = "quota.change", "Quota changed"
    QUOTA_DELETE = "quota.delete", "Quota deleted"
    NOTEBOOK_OPEN = "notebook.open", "Notebook opened"
    NOTEBOOK_CLOSE = "notebook.close", "Notebook socket closed (access ended)"
    DEPLOYMENT_KEY_CREATE = "deployment_key.create", "Deployment key created"
    DEPLOYMENT_KEY_REVOKE = "deployment_key.revoke", "Deployment key revoked"
    CLUSTER_CREDENTIALS_CHANGE = "cluster.credentials_change", "Cluster credentials set"
    CLUSTER_CREDENTIALS_DELETE = "cluster.credentials_delete", "Cluster credentials deleted"
