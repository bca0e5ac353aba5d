"""Following one replica's log in steps, for the live websocket (apps/core/consumers.py).

`apps.backends.selectors.workload_log_follow` blocks between lines (it sleeps and polls the
database inside the generator), so a websocket could not stop it until the workload writes
again. LogTail does the same reads one bounded, non-blocking step at a time: the consumer calls
`read()` in a worker thread, checks the workload's status and attempt itself, and stops by simply
not calling it again."""
from __future__ import annotations

import codecs
import os

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
