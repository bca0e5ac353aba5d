"""Filters shared by the API's list endpoints."""
import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from .dates import OUT_OF_RANGE, to_utc


class UTCIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, handed on in UTC.

    RFC 3339 allows offsets up to +-23:59, PostgreSQL only +-15:59: a timestamp such as
    2026-01-01T00:00:00+20:00 is valid but, passed on with its offset, fails in the database
    (a 500). The same instant in UTC is fine. A value that has no UTC equivalent (year 9999 with
    a negative offset, or year 1 with a positive one) is a 400, and so is one outside the range
    of apps/core/dates.py."""

    default_error_messages = {"overflow": OUT_OF_RANGE}

    def to_python(self, value):
        try:
            parsed = super().to_python(value)
        except OverflowError:  # making a naive value aware in the current time zone
            raise forms.ValidationError(self.error_messages["overflow"], code="overflow") from None
        if parsed is None:
            return parsed
        try:
            return to_utc(parsed)
        except ValueError:
            raise forms.ValidationError(self.error_messages["overflow"], code="overflow") from None


class UTCIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UTCIsoDateTimeField
