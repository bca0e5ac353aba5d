from datetime import UTC

import django_filters

from .choices import AuditAction
from .models import AuditEvent


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    """Compares in UTC, so any offset the client writes (even one PostgreSQL cannot store) works."""

    def filter(self, qs, value):
        return super().filter(qs, value.astimezone(UTC) if value is not None else value)


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.MultipleChoiceFilter(choices=AuditAction.choices)
    actor = django_filters.CharFilter(field_name="actor_username")
    since = UtcIsoDateTimeFilter(field_name="time", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="time", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["action", "actor"]
