"""The body of a model upload: a tar archive (gzip or not) spooled to a temporary file."""
import tempfile

from django.conf import settings
from rest_framework.parsers import BaseParser

from apps.core.errors import PayloadTooLarge


class ArchiveUploadParser(BaseParser):
    """`Content-Type: application/gzip` (or application/x-tar): the body, as a temporary file
    positioned at its start; larger than MODEL_MAX_BYTES answers 413."""

    media_type = "application/*"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = int(settings.CAIRN["MODEL_MAX_BYTES"])
        spooled = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115 (returned open)
        total = 0
        if stream is not None:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                total += len(chunk)
                if total > limit:
                    spooled.close()
                    raise PayloadTooLarge(f"The upload is larger than the {limit} bytes Cairn accepts for a model.")
                spooled.write(chunk)
        spooled.seek(0)
        return spooled
