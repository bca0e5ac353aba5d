import django_filters

from apps.core.filters import UTCIsoDateTimeFilter

from .choices import Kind, WaitingOn, WorkloadStatus
from .models import Workload


class WorkloadFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=WorkloadStatus.choices)
    kind = django_filters.ChoiceFilter(choices=Kind.choices)
    waiting_on = django_filters.MultipleChoiceFilter(choices=WaitingOn.choices)  # queued workloads only
    name = django_filters.CharFilter(lookup_expr="exact")
    name_contains = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    pool = django_filters.CharFilter(field_name="pool__name")
    created_after = UTCIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UTCIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Workload
        fields = ["status", "kind", "name", "pool"]
