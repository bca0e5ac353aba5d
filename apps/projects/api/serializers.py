from rest_framework import serializers

from apps.core.serializers import StrictModelSerializer, StrictSerializer

from ..choices import Role
from ..models import Membership, Project


class ProjectSerializer(StrictModelSerializer):
    role = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["slug", "name", "description", "shared_notebooks", "notebook_idle_timeout", "created_at", "role"]
        # The notebook settings are changed with PATCH (ProjectUpdateSerializer), not at creation.
        read_only_fields = ["created_at", "role", "shared_notebooks", "notebook_idle_timeout"]

    def get_role(self, obj) -> str | None:
        roles = self.context.get("roles", {})
        if obj.pk not in roles and "request" in self.context:  # e.g. a project created by this request
            from ..selectors import membership_role

            return membership_role(user=self.context["request"].user, project=obj)
        return roles.get(obj.pk)


class ProjectUpdateSerializer(StrictModelSerializer):
    class Meta:
        model = Project
        fields = ["name", "description", "shared_notebooks", "notebook_idle_timeout"]


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["username", "role", "created_at"]
        read_only_fields = fields


class MembershipCreateSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)


class MembershipUpdateSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)
