from rest_framework import serializers

from apps.core.dates import DateTimeParam
from apps.core.serializers import StrictSerializer, StrictUUIDField

from ..choices import KEY_PATTERN, MAX_STEP, RunStatus
from ..models import Run


class RunSerializer(serializers.ModelSerializer):
    workload = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True,
                                                  help_text="The workload that made this run; null for a standalone run.")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    summaries = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "name", "status", "workload", "attempt", "client_id", "created_by", "created_at",
                  "finished_at", "summaries"]
        read_only_fields = fields

    def get_summaries(self, run) -> dict:
        return {s.key: {"count": s.count, "min": s.min, "max": s.max, "last": s.last_value, "last_step": s.last_step}
                for s in run.summaries.all()}


class RunDetailSerializer(RunSerializer):
    params = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "params"]
        read_only_fields = fields

    def get_params(self, run) -> dict:
        return {p.key: p.value for p in run.params.all()}


class RunCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    client_id = StrictUUIDField(required=False)
    params = serializers.DictField(required=False)


class RunCreatedSerializer(RunDetailSerializer):
    run_token = serializers.CharField(read_only=True)

    class Meta(RunDetailSerializer.Meta):
        fields = [*RunDetailSerializer.Meta.fields, "run_token"]
        read_only_fields = fields


class RunFinishSerializer(StrictSerializer):
    # The full choice set (one enum in the schema); the service refuses "running".
    status = serializers.ChoiceField(choices=RunStatus.choices, default=RunStatus.FINISHED)


def _check_key(value: str) -> str:
    if not KEY_PATTERN.match(value):
        raise serializers.ValidationError("Invalid metric key.")
    return value


class SeriesQuerySerializer(StrictSerializer):
    key = serializers.CharField(validators=[_check_key])
    max_points = serializers.IntegerField(min_value=8, max_value=20_000, default=1000)
    step_min = serializers.IntegerField(min_value=0, max_value=MAX_STEP, required=False)
    step_max = serializers.IntegerField(min_value=0, max_value=MAX_STEP, required=False)
    time_min = DateTimeParam(required=False)
    time_max = DateTimeParam(required=False)


class PointsQuerySerializer(StrictSerializer):
    key = serializers.CharField(validators=[_check_key])
    after_step = serializers.IntegerField(min_value=0, max_value=MAX_STEP, required=False)
    after_id = serializers.IntegerField(min_value=0, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=10_000, default=5000)


class CompareQuerySerializer(StrictSerializer):
    runs = serializers.CharField()
    only_differs = serializers.BooleanField(default=False)
    keys = serializers.CharField(required=False, allow_blank=True)
    max_points = serializers.IntegerField(min_value=8, max_value=5000, default=500)

    def validate_runs(self, value):
        try:
            ids = [int(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise serializers.ValidationError("runs must be comma-separated run ids.") from None
        if not 1 <= len(ids) <= 100:
            raise serializers.ValidationError("Compare between 1 and 100 runs.")
        return ids

    def validate_keys(self, value):
        keys = [k for k in value.split(",") if k]
        if len(keys) > 20:
            raise serializers.ValidationError("At most 20 keys.")
        return [_check_key(k) for k in keys]


class ExportQuerySerializer(StrictSerializer):
    keys = serializers.CharField(required=False, allow_blank=True)

    def validate_keys(self, value):
        return [_check_key(k) for k in value.split(",") if k]


class BatchSerializer(serializers.Serializer):
    """Documentation only: batches are validated by apps.tracking.validation (fast, thousands of points)."""

    batch_id = serializers.CharField(required=False, help_text="Client-chosen id; a retried batch is stored once.")
    points = serializers.ListField(child=serializers.DictField(), required=False,
                                   help_text='[{"key": "loss", "step": 1, "value": 0.5, "time": 1700000000.0}]')
    params = serializers.DictField(required=False)
    progress = serializers.DictField(
        required=False, help_text='The sending rank\'s training progress (cairn SDK): {"replica": 0, "step": 120, '
                                  '"steps": [[119, 0.21], [120, 0.20]]}: its last step and recent step times in seconds.')


class CheckpointReportSerializer(StrictSerializer):
    step = serializers.IntegerField(min_value=0, max_value=MAX_STEP)
    size_bytes = serializers.IntegerField(min_value=0, max_value=2**62)
    save_seconds = serializers.FloatField(min_value=0, max_value=10**7)
    blocking_seconds = serializers.FloatField(min_value=0, max_value=10**7)
    replica = serializers.IntegerField(min_value=0, max_value=100_000, default=0)
    name = serializers.RegexField(r"^[A-Za-z0-9_.\-]{0,64}$", required=False, default="")
    sha256 = serializers.RegexField(r"^[0-9a-f]{0,64}$", required=False, default="")
    two_stage = serializers.BooleanField(required=False, default=False)


class CheckpointReportedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workload = serializers.IntegerField(source="workload_id")
    attempt = serializers.IntegerField()
    step = serializers.IntegerField()


class BatchResultSerializer(serializers.Serializer):
    points = serializers.IntegerField()
    params = serializers.IntegerField()
    duplicate = serializers.BooleanField()
