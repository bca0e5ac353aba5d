"""The ingestion endpoint's parser: its own body limit (batches are bigger than workload specs,
see conf.TRACKING_INGEST_MAX_BYTES), orjson for speed, and the same refusals as the API's
StrictJSONParser: NaN / Infinity are not JSON, bodies over the limit answer 413. orjson itself
refuses nesting past 1,024 levels (without recursing in Python) and unpaired surrogates (400);
NUL characters are refused by validation.parse_batch, which checks every string of a batch."""
import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from apps.core.errors import PayloadTooLarge

from .conf import setting


class IngestJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = setting("TRACKING_INGEST_MAX_BYTES")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"Request body is larger than {limit} bytes; send smaller batches.")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
