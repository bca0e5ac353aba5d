from django.conf import settings
from django.db import models

from apps.accounts.models import ApiToken
from apps.workloads.models import Workload

KEY_PREFIX = "cairndk_"


class DeploymentKey(models.Model):
    """A key that lets its holder call one deployment through the gateway (and nothing else):
    `cairndk_<prefix>_<secret>`. Stored like API tokens: a lookup prefix and a hash of the secret."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="deployment_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({KEY_PREFIX}{self.prefix}_…)"

    @staticmethod
    def generate() -> tuple[str, str, str]:
        """Return (prefix, secret, full key)."""
        prefix, secret, _ = ApiToken.generate()
        return prefix, secret, f"{KEY_PREFIX}{prefix}_{secret}"

    def matches(self, secret: str) -> bool:
        # The same hash and constant-time comparison as API tokens.
        return ApiToken(secret_hash=self.secret_hash).matches(secret)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
