"""Reading replica log files: whole, the last N lines without reading the whole file, or
followed step by step (FileLogReader). Shared by the backends whose replicas write their output
to files Cairn can read (local: this machine's disk; Slurm: the cluster's shared file system)."""
import codecs
import os
from collections.abc import Callable
from pathlib import Path

from .base import LOG_FRAME_CHARS, LogReader

INITIAL_BYTES = 1024 * 1024  # the first read of an attempt hands out at most this much of its tail

_BLOCK = 64 * 1024


def tail_bytes(f, *, end: int, lines: int) -> bytes:
    """The last `lines` lines of the first `end` bytes of binary file `f`."""
    if lines <= 0 or end <= 0:
        return b""
    pos = end
    data = b""
    # One more newline than lines wanted, unless the text does not end with one.
    while pos > 0 and data.count(b"\n") <= lines:
        size = min(_BLOCK, pos)
        pos -= size
        f.seek(pos)
        data = f.read(size) + data
    parts = data.split(b"\n")  # only "\n" ends a line: progress bars redraw with "\r"
    ends_with_newline = parts[-1] == b""
    if ends_with_newline:
        parts.pop()
    return b"\n".join(parts[-lines:]) + (b"\n" if ends_with_newline else b"")


def read_log(path: Path, *, tail: int | None = None) -> str:
    """Text of a log file ('' when it does not exist); tail = only the last N lines."""
    try:
        with open(path, "rb") as f:
            end = os.fstat(f.fileno()).st_size
            data = f.read(end) if tail is None else tail_bytes(f, end=end, lines=tail)
    except (FileNotFoundError, NotADirectoryError):
        return ""
    return data.decode("utf-8", errors="replace")


class FileLogReader(LogReader):
    """Follows a replica's log file: each read() is one bounded, non-blocking look at the file
    (at most LOG_FRAME_CHARS bytes), decoded as UTF-8 across reads. `path(attempt)` is the file of
    the replica's log in that attempt."""

    def __init__(self, *, workload_id: int, replica: int, attempt: int, path: Callable[[int], Path],
                 tail_lines: int | None = 500):
        super().__init__(workload_id=workload_id, replica=replica, attempt=attempt, tail_lines=tail_lines)
        self._path = path
        self._position: int | None = None  # bytes of the file consumed; None = not opened yet
        self._pending = b""  # read from the file but not yet handed out (the initial tail)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self, *, final: bool = False) -> str:
        """Blocking file I/O: call it from a worker thread. A local file is always looked at."""
        if not self._pending:
            self._pending = self._read_file()
        chunk, self._pending = self._pending[:LOG_FRAME_CHARS], self._pending[LOG_FRAME_CHARS:]
        return self._decoder.decode(chunk) if chunk else ""

    def _read_file(self) -> bytes:
        if self.attempt < 1:
            return b""
        try:
            with open(self._path(self.attempt), "rb") as f:
                if self._position is None:
                    end = os.fstat(f.fileno()).st_size
                    if self.tail_lines is not None:
                        data = tail_bytes(f, end=end, lines=self.tail_lines)[-INITIAL_BYTES:]
                        self._position = end
                        return data
                    self._position = 0
                f.seek(self._position)
                data = f.read(LOG_FRAME_CHARS)
                self._position += len(data)
                return data
        except (FileNotFoundError, NotADirectoryError):
            return b""

    def switch(self, attempt: int) -> str:
        rest = self.finish()
        self.attempt, self._position, self._pending, self.tail_lines = attempt, None, b"", None
        self._decoder.reset()
        return rest

    def finish(self) -> str:
        """The end of an incomplete UTF-8 sequence still held by the decoder, if any."""
        return self._decoder.decode(b"", final=True)
