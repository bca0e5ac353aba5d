from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Rejects fields the serializer does not know, instead of silently ignoring them."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class StrictModelSerializer(StrictSerializer, serializers.ModelSerializer):
    pass


class DetailSerializer(serializers.Serializer):
    """The error body every endpoint returns."""

    detail = serializers.CharField()
