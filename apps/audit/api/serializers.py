from rest_framework import serializers

from ..models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_username", read_only=True,
                                  help_text="Username of who did it (kept after the user is deleted); empty: "
                                            "nobody signed in, or Cairn itself.")
    project = serializers.CharField(source="project_slug", read_only=True)
    target = serializers.CharField(source="target_repr", read_only=True)
    details = serializers.DictField(read_only=True, help_text="What changed; never a secret.")

    class Meta:
        model = AuditEvent
        fields = ["id", "time", "actor", "action", "project", "target_type", "target_id", "target", "source_ip",
                  "user_agent", "details"]
        read_only_fields = fields
