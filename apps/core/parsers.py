"""JSON parser with the limits the API promises.

- bodies over DATA_UPLOAD_MAX_MEMORY_SIZE answer 413 (DRF reads the stream itself, so
  Django's own check on request.body never runs for API requests);
- NaN / Infinity are refused (they are not JSON);
- documents nested deeper than MAX_DEPTH are refused;
- NUL characters and lone surrogates (\\ud800 alone) are refused in every string and key:
  PostgreSQL can store neither in text, so catching them here, once for every endpoint, turns
  what would be a 500 at the first INSERT into a 400 that names where the bad string is.

The checks walk the parsed document with an explicit stack, not recursion, so no document can
exhaust Python's stack; json.loads itself recurses in C and raises RecursionError long before
that could happen, which is caught too.
"""
import json
import re

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Deep enough for any spec, label map or params a client has a reason to send.
MAX_DEPTH = 64

_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


def _where(path: tuple) -> str:
    """('env', 'A') -> 'env.A'; ('command', 2) -> 'command[2]'; () -> 'the body'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part[:60]}" if out else part[:60]
    return out or "the body"


def _bad_string(value: str, path: tuple) -> str | None:
    match = _BAD_CHARACTER.search(value)
    if match is None:
        return None
    what = "NUL (\\u0000) characters" if match.group() == "\x00" else "unpaired surrogates (\\ud800-\\udfff)"
    return f"{_where(path)}: text must not contain {what}."


def check_document(data) -> str | None:
    """The first problem of a parsed JSON document (too deep, a string PostgreSQL cannot store),
    as a message naming where it is; None when there is none."""
    stack = [(data, (), 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            problem = _bad_string(value, path)
            if problem:
                return problem
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return f"JSON is nested too deeply (more than {MAX_DEPTH} levels)."
            if isinstance(value, dict):
                for key, item in value.items():
                    # A key with a bad character is named by its printable repr: the key itself
                    # cannot be echoed back as text.
                    if _BAD_CHARACTER.search(key):
                        return _bad_string(key, (*path, ascii(key)))
                    stack.append((item, (*path, key), depth + 1))
            else:
                stack.extend((item, (*path, index), depth + 1) for index, item in enumerate(value))
    return None


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
        except RecursionError:
            raise ParseError(f"JSON is nested too deeply (more than {MAX_DEPTH} levels).") from None
        problem = check_document(data)
        if problem:
            raise ParseError(problem)
        return data
