from django.db.models import QuerySet

from .models import AuditEvent


def audit_events(*, project=None) -> QuerySet[AuditEvent]:
    """Audit events, newest first; only the project's when `project` is given."""
    events = AuditEvent.objects.all()
    if project is not None:
        events = events.filter(project=project)
    return events.order_by("-time", "-id")
