from django.utils import timezone
from rest_framework import serializers

from apps.core.dates import DateTimeParam
from apps.core.serializers import StrictSerializer

from ..models import TOKEN_PREFIX, ApiToken, ApiTokenScope


class ApiTokenSerializer(serializers.ModelSerializer):
    display = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "display", "scopes", "created_at", "expires_at", "last_used_at",
                  "revoked_at", "active"]
        read_only_fields = fields

    def get_display(self, obj: ApiToken) -> str:
        return f"{TOKEN_PREFIX}{obj.prefix}_…"


class ApiTokenCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=ApiTokenScope.choices), required=False, allow_empty=False,
        max_length=len(ApiTokenScope.choices),
    )
    expires_at = DateTimeParam(required=False, allow_null=True)
    never_expires = serializers.BooleanField(required=False, default=False)

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown once, never again.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class LoginSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    token_name = serializers.CharField(max_length=100, required=False, default="cli")


class MeProjectSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    email = serializers.CharField()
    is_staff = serializers.BooleanField()
    projects = MeProjectSerializer(many=True)


class LoginResponseSerializer(serializers.Serializer):
    token = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)
    user = MeSerializer()


class SessionLoginSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)


class SessionStateSerializer(serializers.Serializer):
    authenticated = serializers.BooleanField()
    user = MeSerializer(allow_null=True)
