from rest_framework import serializers

from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import CommandField, RunTimeLimitField, WorkloadCreateSerializer
from apps.workloads.choices import Kind


class TrainingJobCreateSerializer(IsolatedSpecMixin, WorkloadCreateSerializer):
    """A (possibly distributed) training job: `replicas` processes started together (gang)."""

    kind = Kind.TRAINING

    command = CommandField(required=False, help_text="Shell string or argv list. Required unless `image` is given.")
    working_dir = serializers.CharField(required=False, max_length=4096)
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

    def build_spec(self, data):
        spec = super().build_spec(data)
        if data.get("command"):
            spec["command"] = data["command"]
        if data.get("working_dir"):
            spec["working_dir"] = data["working_dir"]
        return spec
