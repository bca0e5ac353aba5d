"""Writes of the deployments app: deployment keys."""
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import ApiToken, User
from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError, ServiceError
from apps.workloads.choices import Kind
from apps.workloads.models import Workload

from .models import DeploymentKey


def deployment_key_create(*, workload: Workload, name: str, created_by: User | None) -> tuple[DeploymentKey, str]:
    """Create a key for the deployment; return it and the full key, which is never stored or shown again."""
    if workload.kind != Kind.DEPLOYMENT:
        raise ServiceError("Keys exist for deployments only.")
    prefix, secret, full = DeploymentKey.generate()
    with transaction.atomic():
        key = DeploymentKey.objects.create(
            workload=workload, name=name, prefix=prefix, secret_hash=ApiToken.hash_secret(secret), created_by=created_by,
        )
        audit_record(action=AuditAction.DEPLOYMENT_KEY_CREATE, actor=created_by, project=workload.project, target=key,
                     details={"deployment": workload.name, "key_prefix": prefix})
    return key, full


def deployment_key_revoke(*, key: DeploymentKey, user: User | None = None) -> DeploymentKey:
    if key.revoked_at is not None:
        raise ConflictError("This key is already revoked.")
    with transaction.atomic():
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit_record(action=AuditAction.DEPLOYMENT_KEY_REVOKE, actor=user, project=key.workload.project, target=key,
                     details={"deployment": key.workload.name, "key_prefix": key.prefix})
    return key
