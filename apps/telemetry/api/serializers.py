import re

from rest_framework import serializers

from apps.core.serializers import StrictSerializer

METRIC = re.compile(r"^[a-z0-9_.]{1,64}$")


class SeriesQuerySerializer(StrictSerializer):
    metric = serializers.RegexField(METRIC, required=False)
    gpu = serializers.IntegerField(min_value=0, max_value=1023, required=False)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    max_points = serializers.IntegerField(min_value=2, max_value=5000, default=500)

    def validate(self, data):
        if data.get("since") and data.get("until") and data["since"] >= data["until"]:
            raise serializers.ValidationError("since must be before until.")
        return data
