"""Filters shared by the API's list endpoints."""
from datetime import UTC

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField


class UTCIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, handed on in UTC.

    RFC 3339 allows offsets up to +-23:59, PostgreSQL only +-15:59: a timestamp such as
    2026-01-01T00:00:00+20:00 is valid but, passed on with its offset, fails in the database
    (a 500). The same instant in UTC is fine. A value that has no UTC equivalent (year 9999 with
    a negative offset) is a 400."""

    default_error_messages = {"overflow": "This date-time is out of range once converted to UTC."}

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError(self.error_messages["overflow"], code="overflow") from None


class UTCIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UTCIsoDateTimeField
