"""Static files (the dashboard's bundle, the admin's and the API docs' assets) served by
WhiteNoise, with each body sent as an async iterator.

Cairn's web server is ASGI (uvicorn) in both modes. WhiteNoise hands Django a FileResponse, a
synchronous iterator, which Django's ASGI handler can only consume with a warning ("StreamingHttpResponse
must consume synchronous iterators") for every file; here the file is read in worker threads
instead, a block at a time, with WhiteNoise's headers, statuses and ranges unchanged."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from django.http import StreamingHttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware

CHUNK_BYTES = 64 * 1024


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    @staticmethod
    def serve(static_file, request) -> StreamingHttpResponse:
        answer = static_file.get_response(request.method, request.META)
        response = StreamingHttpResponse(_read(answer.file), status=int(answer.status))
        del response["Content-Type"]  # WhiteNoise's own headers say what the file is
        for key, value in answer.headers:
            response[key] = value
        return response


async def _read(file) -> AsyncIterator[bytes]:
    if file is None:  # HEAD, 304 Not Modified
        return
    try:
        while chunk := await asyncio.to_thread(file.read, CHUNK_BYTES):
            yield chunk
    finally:
        file.close()
