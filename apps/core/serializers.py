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
    """The error body every endpoint returns: a one-line `detail`, and for invalid input the
    field-by-field `errors` ({"field": ["message", ...]}, nested as the input is)."""

    detail = serializers.CharField()
    errors = serializers.DictField(required=False, help_text="Field errors, for invalid input.")


class StrictUUIDField(serializers.UUIDField):
    """A UUID given as a string. DRF's UUIDField also takes integers (and so booleans: `false`
    became 00000000-0000-0000-0000-000000000000); the API documents a string, so only a string
    is accepted."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)
