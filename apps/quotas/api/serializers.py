from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.clusters.models import ResourcePool
from apps.clusters.selectors import pool_accelerators
from apps.core.serializers import StrictModelSerializer

from ..models import Quota
from ..selectors import quota_beyond_capacity, quota_usage


class QuotaWaitSerializer(serializers.Serializer):
    """The project's queued work in the pool that waits on one thing."""

    waiting_on = serializers.CharField(help_text="A workload's waiting_on, or 'undecided' before the scheduler's first decision.")
    workloads = serializers.IntegerField()
    gpu_milli = serializers.IntegerField(help_text="GPUs (milli) these workloads ask for, all replicas.")
    cpu_milli = serializers.IntegerField(help_text="CPU (milli-cores) these workloads ask for, all replicas.")
    memory_mb = serializers.IntegerField(help_text="Memory (MiB) these workloads ask for, all replicas.")
    resources = serializers.ListField(
        child=serializers.ChoiceField(choices=["gpu", "cpu", "memory"]),
        help_text="For waits on quota: the resources it waits for (those asked for beyond the project's free "
                  "nominal; all those asked for when its nominal is lent out); 'gpu' for a GPU-hour budget.")


class QuotaUsageSerializer(serializers.Serializer):
    """How much of a quota is in use now and this budget period (see docs/live.md)."""

    allocated_gpu_milli = serializers.IntegerField(help_text="Held by the project's admitted, running and stopping workloads.")
    allocated_cpu_milli = serializers.IntegerField()
    allocated_memory_mb = serializers.IntegerField()
    used_gpu_milli = serializers.IntegerField(help_text="Same as allocated_gpu_milli.")
    borrowed_gpu_milli = serializers.IntegerField(help_text="Used above nominal: max(0, used - nominal).")
    lendable_gpu_milli = serializers.IntegerField(
        help_text="Unused nominal others may borrow: max(0, nominal - used), capped by the lending limit.")
    queued_gpu_milli = serializers.IntegerField(help_text="GPUs (milli) asked for by the project's queued workloads in the pool.")
    waiting_gpu_milli = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="queued_gpu_milli split by what the work waits on: a workload's waiting_on, or 'undecided' "
                  "before the scheduler's first decision.")
    queued_cpu_milli = serializers.IntegerField(help_text="CPU (milli-cores) asked for by the project's queued workloads in the pool.")
    queued_memory_mb = serializers.IntegerField(help_text="Memory (MiB) asked for by the project's queued workloads in the pool.")
    waiting = QuotaWaitSerializer(many=True, help_text="Queued work by what it waits on, with every resource it asks for.")
    gpu_hours_this_period = serializers.FloatField()
    gpu_hour_budget = serializers.FloatField(allow_null=True)
    budget_left_gpu_hours = serializers.FloatField(allow_null=True, help_text="Never negative; null without a budget.")
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField()


class QuotaSerializer(StrictModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", queryset=ResourcePool.objects.all())
    usage = serializers.SerializerMethodField()
    pool_accelerators = serializers.SerializerMethodField(
        help_text="The pool's accelerator types (nvidia, amd, ascend, none) and CPU architectures.")

    class Meta:
        model = Quota
        fields = ["id", "project", "pool", "pool_accelerators", "nominal_gpu_milli", "nominal_cpu_milli", "nominal_memory_mb",
                  "borrowing_limit_gpu_milli", "lending_limit_gpu_milli", "gpu_hour_budget", "budget_period",
                  "usage", "created_at", "updated_at"]
        read_only_fields = ["id", "project", "usage", "pool_accelerators", "created_at", "updated_at"]
        extra_kwargs = {
            "nominal_gpu_milli": {"max_value": 10_000_000},
            "nominal_cpu_milli": {"max_value": 100_000_000},
            "nominal_memory_mb": {"max_value": 1_000_000_000},
            "borrowing_limit_gpu_milli": {"max_value": 10_000_000},
            "lending_limit_gpu_milli": {"max_value": 10_000_000},
        }

    def validate(self, attrs):
        """Nominal beyond what the pool's nodes hold together is refused (400, naming the pool's
        total); a pool with no nodes yet is not checked."""
        attrs = super().validate(attrs)
        pool = attrs.get("pool") or getattr(self.instance, "pool", None)
        if pool is not None:
            def value(field):
                return attrs[field] if field in attrs else getattr(self.instance, field, None)

            beyond = quota_beyond_capacity(pool=pool, gpu_milli=value("nominal_gpu_milli"),
                                           cpu_milli=value("nominal_cpu_milli"), memory_mb=value("nominal_memory_mb"))
            if beyond:
                raise serializers.ValidationError({field: [message] for field, message in beyond.items()})
        return attrs

    @extend_schema_field({"type": "object", "properties": {
        "types": {"type": "array", "items": {"type": "string"}},
        "architectures": {"type": "array", "items": {"type": "string"}}}, "required": ["types", "architectures"]})
    def get_pool_accelerators(self, obj) -> dict:
        known = self.context.get("pool_accelerators", {}).get(obj.pool_id)
        return known if known is not None else pool_accelerators(pools=[obj.pool])[obj.pool_id]

    @extend_schema_field(QuotaUsageSerializer)
    def get_usage(self, obj) -> dict:
        usage = self.context.get("usage", {}).get(obj.pk)
        if usage is None:
            usage = quota_usage(quotas=[obj])[obj.pk]
        return QuotaUsageSerializer(usage).data


class QuotaUpdateSerializer(QuotaSerializer):
    class Meta(QuotaSerializer.Meta):
        read_only_fields = [*QuotaSerializer.Meta.read_only_fields, "pool"]
