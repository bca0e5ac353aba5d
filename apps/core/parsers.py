"""JSON parser with the limits the API promises.

- bodies over DATA_UPLOAD_MAX_MEMORY_SIZE answer 413 (DRF reads the stream itself, so
  Django's own check on request.body never runs for API requests);
- NaN / Infinity are refused (they are not JSON);
- NUL characters are refused anywhere: PostgreSQL cannot store them in text, so catching them
  here turns what would be a 500 into a clear 400.
"""
import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def _contains_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_contains_nul(v) for v in value)
    return False


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if limit is not None and len(raw) > limit:
            from .errors import PayloadTooLarge  # here: errors imports DRF views, which import parsers

            raise PayloadTooLarge(f"Request body is larger than {limit} bytes.")
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.loads(raw.decode(encoding), parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if _contains_nul(data):
            raise ParseError("JSON strings must not contain NUL (\\u0000) characters.")
        return data
