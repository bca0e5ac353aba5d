from rest_framework import serializers

from apps.clusters.models import ResourcePool
from apps.core.serializers import StrictModelSerializer

from ..models import Quota


class QuotaSerializer(StrictModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", queryset=ResourcePool.objects.all())
    usage = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = ["id", "project", "pool", "nominal_gpu_milli", "nominal_cpu_milli", "nominal_memory_mb",
                  "borrowing_limit_gpu_milli", "lending_limit_gpu_milli", "gpu_hour_budget", "budget_period",
                  "usage", "created_at", "updated_at"]
        read_only_fields = ["id", "project", "usage", "created_at", "updated_at"]
        extra_kwargs = {
            "nominal_gpu_milli": {"max_value": 10_000_000},
            "nominal_cpu_milli": {"max_value": 100_000_000},
            "nominal_memory_mb": {"max_value": 1_000_000_000},
            "borrowing_limit_gpu_milli": {"max_value": 10_000_000},
            "lending_limit_gpu_milli": {"max_value": 10_000_000},
        }

    def get_usage(self, obj) -> dict:
        return self.context.get("usage", {}).get(obj.pk, {})


class QuotaUpdateSerializer(QuotaSerializer):
    class Meta(QuotaSerializer.Meta):
        read_only_fields = [*QuotaSerializer.Meta.read_only_fields, "pool"]
