"""Following one replica's log in steps, for the live websocket (apps/core/consumers.py) and
for `GET .../logs/?follow=1` (`follow_log`).

`apps.backends.selectors.workload_log_follow` blocks between lines (it sleeps and polls the
database inside the generator), so a websocket could not stop it until the workload writes
again, and under ASGI Django collects a synchronous generator whole before sending anything.
LogTail does the same reads one bounded, non-blocking step at a time: the consumer calls
`read()` in a worker thread, checks the workload's status and attempt itself, and stops by simply
not calling it again. `follow_log` is the same loop as an async generator: Django's ASGI handler
sends each piece as it is yielded and cancels the generator when the client goes away."""
from __future__ import annotations

import asyncio
import codecs
import os
from collections.abc import AsyncIterator

from apps.backends.local.logs import tail_bytes
from apps.backends.local.paths import replica_log_path

FRAME_BYTES = 256 * 1024  # at most this much raw output per read (one websocket frame)
INITIAL_BYTES = 1024 * 1024  # the first read of an attempt sends at most this much of its tail


class LogTail:
    def __init__(self, *, workload_id: int, replica: int, attempt: int, tail_lines: int | None = 500):
        self.workload_id = workload_id
        self.replica = replica
        self.attempt = attempt
        self._tail = tail_lines  # lines to start with for the first attempt; later ones start at 0
        self._position: int | None = None  # bytes of the file consumed; None = not opened yet
        self._pending = b""  # read from the file but not yet handed out (the initial tail)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self) -> str:
        """New output since the last call (at most FRAME_BYTES of it), '' when there is none.
        Blocking file I/O: call it from a worker thread."""
        if not self._pending:
            self._pending = self._read_file()
        chunk, self._pending = self._pending[:FRAME_BYTES], self._pending[FRAME_BYTES:]
        return self._decoder.decode(chunk) if chunk else ""

    def _read_file(self) -> bytes:
        if self.attempt < 1:
            return b""
        try:
            with open(replica_log_path(self.workload_id, self.attempt, self.replica), "rb") as f:
                if self._position is None:
                    end = os.fstat(f.fileno()).st_size
                    if self._tail is not None:
                        data = tail_bytes(f, end=end, lines=self._tail)[-INITIAL_BYTES:]
                        self._position = end
                        return data
                    self._position = 0
                f.seek(self._position)
                data = f.read(FRAME_BYTES)
                self._position += len(data)
                return data
        except (FileNotFoundError, NotADirectoryError):
            return b""

    def switch(self, attempt: int) -> str:
        """Carry on with a later attempt's log, from its beginning; returns what the decoder held."""
        rest = self.finish()
        self.attempt, self._position, self._pending, self._tail = attempt, None, b"", None
        self._decoder.reset()
        return rest

    def finish(self) -> str:
        """The end of an incomplete UTF-8 sequence still held by the decoder, if any."""
        return self._decoder.decode(b"", final=True)


FOLLOW_POLL_SECONDS = 0.25  # how often a follow with nothing new looks at the file and the status


async def follow_log(*, workload_id: int, replica: int, attempt: int | None, tail: int | None,
                     poll_seconds: float = FOLLOW_POLL_SECONDS) -> AsyncIterator[str]:
    """Yield one replica's log as it is written, starting with its last `tail` lines (None: from
    the beginning); end once the workload is finished and the log drained.

    With attempt None it follows the latest attempt: after a restart it carries on with the new
    attempt's log from its beginning; a given attempt ends once a later one has started. File
    reads and the status check run in worker threads; the waits are asyncio sleeps, so a client
    that disconnects cancels this generator at once."""
    from asgiref.sync import sync_to_async

    from apps.workloads.choices import TERMINAL
    from apps.workloads.models import Workload

    @sync_to_async
    def state() -> dict | None:
        return Workload.objects.filter(pk=workload_id).values("status", "attempt").first()

    row = await state()
    if row is None:
        return
    follow_latest = attempt is None
    reader = LogTail(workload_id=workload_id, replica=replica, attempt=row["attempt"] if follow_latest else attempt,
                     tail_lines=tail)
    read = sync_to_async(reader.read, thread_sensitive=False)

    async def drain() -> AsyncIterator[str]:
        while text := await read():
            yield text

    while True:
        text = await read()
        if text:
            yield text
            continue
        row = await state()
        if row is None:
            break
        if row["attempt"] > reader.attempt:
            # The replicas of the old attempt are gone before a new one starts: drain, then switch.
            async for text in drain():
                yield text
            if not follow_latest:
                break
            if rest := reader.switch(row["attempt"]):
                yield rest
            continue
        if row["status"] in TERMINAL:
            async for text in drain():
                yield text
            break
        await asyncio.sleep(poll_seconds)
    if rest := reader.finish():
        yield rest
