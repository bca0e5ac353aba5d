"""JSON parser that refuses NUL bytes anywhere in the document.

PostgreSQL cannot store NUL in text columns; catching it at the edge turns what would be a
500 into a clear 400.
"""
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


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if _contains_nul(data):
            raise ParseError("JSON strings must not contain NUL (\\u0000) characters.")
        return data
