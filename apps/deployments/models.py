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


class DeploymentScale(models.Model):
    """The autoscaler's view of one deployment: the replicas it wants, its memory between decisions
    (apps/deployments/autoscaler.py State) and why a scale-up waits. `Workload.replicas` stays the
    replicas admitted (and placed) by the scheduler; a scale-up above it waits for the scheduler
    like any admission, a scale-down lowers it at once."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="scale", primary_key=True)
    desired = models.PositiveIntegerField(default=0)
    requested_at = models.DateTimeField(null=True, blank=True)  # when the pending scale-up was asked for
    pending_reason = models.TextField(blank=True)  # why the scale-up waits (the scheduler's words)
    panic_until = models.FloatField(null=True, blank=True)
    panic_peak = models.PositiveIntegerField(default=0)
    last_demand = models.FloatField(null=True, blank=True)
    decision = models.JSONField(default=dict, blank=True)  # the last decision: concurrency, panicking, reason
    updated_at = models.DateTimeField(auto_now=True)


class DeploymentRevision(models.Model):
    """One version of what a deployment runs: its command, image, env and resources (per replica:
    gpu_milli, cpu_milli, memory_mb). Revision 1 is what it was created with; each change makes the
    next one, rolled out by the reconciler."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    spec = models.JSONField(default=dict)  # {"command", "image", "env", "resources"}
    strategy = models.CharField(max_length=16, default="rolling")  # rolling | canary
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["workload", "number"], name="deployment_revision_unique")]


class DeploymentRollout(models.Model):
    """Which revision a deployment's replicas run: `stable_revision` on all of them, except during
    a canary, when the last replica runs `canary_revision` and gets `canary_weight` percent of the
    requests. Replicas are replaced `max_unavailable` at a time (a rolling update).

    Surge: a rollout may run extra replicas for a while (`max_surge` in a rolling update; one for
    the canary of a single-replica deployment). They are asked of the scheduler like a scale-up
    (`surge_wanted`); once admitted they are the top `surge` of `Workload.replicas`, and released
    when the rolling update is complete (or the canary is promoted and rolled out, or withdrawn)."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="rollout", primary_key=True)
    stable_revision = models.PositiveIntegerField(default=1)
    canary_revision = models.PositiveIntegerField(null=True, blank=True)
    canary_weight = models.PositiveSmallIntegerField(default=0)  # percent of requests
    max_unavailable = models.PositiveSmallIntegerField(default=1)
    max_surge = models.PositiveSmallIntegerField(default=0)
    surge_wanted = models.PositiveSmallIntegerField(default=0)  # extra replicas the rollout asks for
    surge = models.PositiveSmallIntegerField(default=0)  # of them, admitted (counted in Workload.replicas)
    surge_requested_at = models.DateTimeField(null=True, blank=True)
    pending_reason = models.TextField(blank=True)  # why the surge waits (the scheduler's words)
    updated_at = models.DateTimeField(auto_now=True)

    def revision_of(self, replica: int, replicas: int) -> int:
        """The revision replica `replica` (of `replicas`) should run."""
        if self.canary_revision is not None and replicas >= 2 and replica == replicas - 1:
            return self.canary_revision
        return self.stable_revision
