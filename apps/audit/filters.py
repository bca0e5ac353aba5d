import django_filters

from apps.core.filters import UTCIsoDateTimeFilter

from .choices import AuditAction
from .models import AuditEvent


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.MultipleChoiceFilter(choices=AuditAction.choices)
    actor = django_filters.CharFilter(field_name="actor_username")
    since = UTCIsoDateTimeFilter(field_name="time", lookup_expr="gte")
    until = UTCIsoDateTimeFilter(field_name="time", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["action", "actor"]
