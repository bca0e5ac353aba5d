import hashlib
import hmac
import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "cairn_"


class User(AbstractUser):
    """A person (or robot account) using Cairn. Projects and roles live in `projects`."""


class ApiTokenScope(models.TextChoices):
    READ = "read", "Read"
    WRITE = "write", "Write"


class ApiToken(models.Model):
    """A personal API token: `cairn_<prefix>_<secret>`. Only a hash of the secret is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({TOKEN_PREFIX}{self.prefix}_…)"

    @staticmethod
    def hash_secret(secret: str) -> str:
        # Secrets are 256-bit random values, so a fast hash is enough (no dictionary to attack).
        return hashlib.sha256(secret.encode()).hexdigest()

    @staticmethod
    def generate() -> tuple[str, str, str]:
        """Return (prefix, secret, full token)."""
        prefix = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        return prefix, secret, f"{TOKEN_PREFIX}{prefix}_{secret}"

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, self.hash_secret(secret))

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()

    def allows(self, scope: str) -> bool:
        return scope in self.scopes
