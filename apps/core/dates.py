"""Date-time inputs of the API (query parameters and bodies): parsed, turned into UTC, and kept
inside a range that date arithmetic cannot leave.

Python's datetime stops at years 1 and 9999: `9999-12-31T23:59:59-23:59` has no UTC equivalent,
and `until=0001-01-01` minus the default one-hour window overflows. Both were 500s; here they
are a 400 saying the value is out of range. The margin of a day at each end leaves room for the
windows and buckets the selectors compute from a bound."""
from datetime import UTC, datetime

from rest_framework import serializers

EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
OUT_OF_RANGE = "This date-time is out of range: give one between 0001-01-02 and 9999-12-30 (UTC)."


def to_utc(value: datetime) -> datetime:
    """`value` (aware, or naive meaning UTC) in UTC; ValueError(OUT_OF_RANGE) when it has no UTC
    equivalent or lies outside [EARLIEST, LATEST]."""
    try:
        value = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except OverflowError:
        raise ValueError(OUT_OF_RANGE) from None
    if not EARLIEST <= value <= LATEST:
        raise ValueError(OUT_OF_RANGE)
    return value


class DateTimeParam(serializers.DateTimeField):
    """DRF's DateTimeField, handed on in UTC and within range (else a 400, not an OverflowError)."""

    default_error_messages = {"range": OUT_OF_RANGE}

    def to_internal_value(self, value):
        parsed = super().to_internal_value(value)
        try:
            return to_utc(parsed)
        except ValueError:
            self.fail("range")
