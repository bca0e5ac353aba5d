from django.conf import settings
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models

from .choices import Role

slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$",
    "Use 1-40 lowercase letters, digits and hyphens, starting and ending with a letter or digit.",
)


class Project(models.Model):
    """A tenant: workloads, quotas and members all belong to one project."""

    slug = models.CharField(max_length=40, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    # Notebooks (docs/notebooks.md): whether owners and maintainers may open their members'
    # notebooks (off: only a notebook's creator), and how long a notebook may stay idle before it
    # is stopped (seconds; 0: never; a notebook's own idle_timeout overrides it).
    shared_notebooks = models.BooleanField(
        default=False, help_text="Owners and maintainers may open notebooks other members started.")
    notebook_idle_timeout = models.PositiveIntegerField(
        default=3600, validators=[MaxValueValidator(30 * 86400)],
        help_text="Seconds a notebook may stay idle before Cairn stops it; 0: never.")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user")]
        ordering = ["project", "user"]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class IdempotencyKey(models.Model):
    """The first answer to a create request sent with an `Idempotency-Key` header, kept per
    project, so that a client retrying after a dropped connection gets it again instead of a
    second object (apps/projects/api/base.py). Pruned after IDEMPOTENCY_KEY_TTL_HOURS."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="idempotency_keys")
    key = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=64)  # sha256 of the method, path and canonical body
    status_code = models.PositiveSmallIntegerField(null=True)  # null while the first request runs
    response = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="idempotency_key_unique_per_project")]

    def __str__(self) -> str:
        return f"{self.project_id}:{self.key}"
