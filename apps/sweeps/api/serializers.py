from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.serializers import StrictSerializer
from apps.tracking.choices import KEY_MAX_LENGTH, KEY_PATTERN
from apps.workloads.api.serializers import NAME_RE, PriorityField
from apps.workloads.choices import Priority

from ..choices import Algorithm, Direction
from ..models import Sweep, Trial


class ObjectiveSerializer(StrictSerializer):
    metric = serializers.CharField(max_length=KEY_MAX_LENGTH,
                                   help_text="The metric key the trials log with the SDK (cairn.log({key: value}, step=...)).")
    direction = serializers.ChoiceField(choices=Direction.choices, default=Direction.MAXIMIZE)

    def validate_metric(self, value):
        if not KEY_PATTERN.match(value):
            raise serializers.ValidationError(
                f"'{value[:50]}' is not a metric key: 1-{KEY_MAX_LENGTH} letters, digits and _ . - / :.")
        return value


class BudgetSerializer(StrictSerializer):
    max_trials = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=100_000,
                                          help_text="Trials to run at most (grid: at most the grid's size).")
    max_gpu_hours = serializers.FloatField(required=False, allow_null=True, min_value=0.001, max_value=1_000_000,
                                           help_text="GPU-hours the trials may hold; no trial starts after that.")


class EarlyStoppingSerializer(StrictSerializer):
    min_resource = serializers.IntegerField(default=1, min_value=1, max_value=1_000_000,
                                            help_text="ASHA: the step of the first rung.")
    reduction_factor = serializers.IntegerField(default=3, min_value=2, max_value=100,
                                                help_text="ASHA: rungs at min_resource x factor^k; the best "
                                                          "1/factor of the trials at a rung go on.")


@extend_schema_field({"oneOf": [{"type": "object", "additionalProperties": {"type": "object"}},
                                {"type": "array", "items": {"type": "object"}}]})
class SpaceField(serializers.JSONField):
    """A search space (docs/sweeps.md): {name: {type, low, high, log, step, choices, when}}."""


class SweepCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=50, help_text="DNS label of at most 50 characters; trials are "
                                                          "named <name>-<number>.")
    template = serializers.JSONField(help_text="The training job every trial runs: the body of POST "
                                               "/training-jobs/ without name and priority.")
    space = SpaceField()
    objective = ObjectiveSerializer()
    algorithm = serializers.ChoiceField(choices=Algorithm.choices, default=Algorithm.RANDOM)
    budget = BudgetSerializer()
    max_concurrent = serializers.IntegerField(default=1, min_value=1, max_value=1000)
    priority = PriorityField(required=False, default=Priority.P4)
    seed = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=2**32 - 1)
    early_stopping = EarlyStoppingSerializer(required=False)

    def validate_name(self, value):
        if not NAME_RE.match(value):
            raise serializers.ValidationError(
                "Use 1-50 lowercase letters, digits and '-', starting and ending with a letter or digit.")
        return value

    def validate(self, attrs):
        early = attrs.get("early_stopping")
        if early and attrs.get("algorithm") != Algorithm.ASHA:
            raise serializers.ValidationError({"early_stopping": ["Only the asha algorithm stops trials early."]})
        return attrs


class TrialBriefSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    objective = serializers.FloatField()
    params = serializers.JSONField()
    run = serializers.IntegerField(allow_null=True)
    workload = serializers.IntegerField(allow_null=True)


class SweepSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    priority = PriorityField(read_only=True)
    objective = serializers.SerializerMethodField()
    budget = serializers.SerializerMethodField()
    early_stopping = serializers.SerializerMethodField()
    trials = serializers.SerializerMethodField(help_text="Trials by status.")
    best_trial = serializers.SerializerMethodField()
    space = serializers.JSONField(read_only=True)
    template = serializers.JSONField(read_only=True)

    class Meta:
        model = Sweep
        fields = ["id", "name", "project", "pool", "status", "status_message", "algorithm", "objective", "budget",
                  "early_stopping", "max_concurrent", "priority", "seed", "space", "template", "trials", "best_trial",
                  "created_by", "created_at", "updated_at", "finished_at"]
        read_only_fields = fields

    @extend_schema_field(ObjectiveSerializer)
    def get_objective(self, obj) -> dict:
        return {"metric": obj.objective_key, "direction": obj.direction}

    @extend_schema_field(BudgetSerializer)
    def get_budget(self, obj) -> dict:
        return {"max_trials": obj.max_trials, "max_gpu_hours": obj.max_gpu_hours}

    @extend_schema_field(EarlyStoppingSerializer(allow_null=True))
    def get_early_stopping(self, obj) -> dict | None:
        if obj.algorithm != Algorithm.ASHA:
            return None
        return {"min_resource": obj.min_resource, "reduction_factor": obj.reduction_factor}

    def get_trials(self, obj) -> dict[str, int]:
        return self.context.get("counts", {}).get(obj.pk, {})

    @extend_schema_field(TrialBriefSerializer(allow_null=True))
    def get_best_trial(self, obj) -> dict | None:
        return self.context.get("best", {}).get(obj.pk)


class TrialWorkloadSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField()
    status_reason = serializers.CharField()
    waiting_on = serializers.CharField(allow_null=True, help_text="While queued: what it waits on (a workload's "
                                                                  "waiting_on; null otherwise, or before the "
                                                                  "scheduler's first decision).")
    pending_reason = serializers.CharField(help_text="While queued: the scheduler's reason, in words.")


class TrialSerializer(serializers.ModelSerializer):
    workload = serializers.SerializerMethodField()
    run = serializers.SerializerMethodField(help_text="The run holding the trial's metrics (its latest attempt).")
    params = serializers.JSONField(read_only=True)

    class Meta:
        model = Trial
        fields = ["id", "number", "status", "params", "objective", "message", "last_step", "last_value",
                  "pruned_step", "pruned_rung", "workload", "run", "created_at", "finished_at"]
        read_only_fields = fields

    @extend_schema_field(TrialWorkloadSerializer(allow_null=True))
    def get_workload(self, obj) -> dict | None:
        w = obj.workload
        if w is None:
            return None
        queued = w.status == "queued"
        return {"id": w.pk, "name": w.name, "status": w.status, "status_reason": w.status_reason,
                "waiting_on": (w.waiting_on or None) if queued else None,
                "pending_reason": w.pending_reason if queued else ""}

    def get_run(self, obj) -> int | None:
        return self.context.get("runs", {}).get(obj.pk)


class ImportanceSerializer(serializers.Serializer):
    importances = serializers.DictField(child=serializers.FloatField(),
                                        help_text="Parameter -> importance (Optuna's get_param_importances, its default evaluator; they sum to 1).")
    completed_trials = serializers.IntegerField()
