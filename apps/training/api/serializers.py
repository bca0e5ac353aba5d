from django.conf import settings
from rest_framework import serializers

from apps.clusters.choices import Backend
from apps.clusters.workdir import (
    WorkingDirError,
    check_container_working_dir,
    check_working_dir,
    check_working_dir_form,
)
from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import CommandField, RunTimeLimitField, WorkloadCreateSerializer
from apps.workloads.choices import Kind


class TrainingJobCreateSerializer(IsolatedSpecMixin, WorkloadCreateSerializer):
    """A (possibly distributed) training job: `replicas` processes started together (gang)."""

    kind = Kind.TRAINING

    command = CommandField(required=False, help_text="Shell string or argv list. Required unless `image` is given.")
    working_dir = serializers.CharField(
        required=False, max_length=4096, trim_whitespace=False,
        help_text="Where the replicas start. Local pools: a path relative to the workload's own folder (created if "
                  "missing), or an absolute path inside a directory the pool allows (`allowed_paths` of the pool). "
                  "Kubernetes pools: an absolute path inside the container. Default: the workload's own folder.",
    )
    replicas = serializers.IntegerField(required=False, default=1, min_value=1, max_value=512)
    max_runtime_seconds = RunTimeLimitField(
        required=False,
        help_text="Run-time limit in seconds (60 .. 2592000, i.e. 30 days; null or omitted: none). A run still "
                  "going after that long is stopped (SIGTERM, then SIGKILL after the grace period) and ends failed "
                  "with reason DeadlineExceeded. Restarts count against it; a requeue after a preemption starts it "
                  "afresh. The scheduler uses it for estimated starts and GPU-hour budgets.",
    )

    def validate(self, attrs):
        if not attrs.get("command") and not attrs.get("image"):
            raise serializers.ValidationError({"command": ["A training job needs a command (or an image)."]})
        return attrs

    def validate_working_dir(self, value):
        """What holds on every pool ('..', '~', NUL); the pool's own rules come in validate_for_pool."""
        try:
            return check_working_dir_form(value)
        except WorkingDirError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_for_pool(self, pool) -> None:
        super().validate_for_pool(pool)
        value = self.validated_data.get("working_dir")
        if not value:
            return
        try:
            if pool.cluster.backend == Backend.KUBERNETES:
                value = check_container_working_dir(value)
            else:
                value = check_working_dir(value, allowed_roots=pool.allowed_paths or [],
                                          denied_roots=[str(settings.CAIRN_DATA_DIR)])
        except WorkingDirError as exc:
            raise serializers.ValidationError({"working_dir": [str(exc)]}) from None
        self.validated_data["working_dir"] = value

    def build_spec(self, data):
        spec = super().build_spec(data)
        if data.get("command"):
            spec["command"] = data["command"]
        if data.get("working_dir"):
            spec["working_dir"] = data["working_dir"]
        return spec
