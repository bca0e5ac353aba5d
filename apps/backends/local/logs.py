"""Reading replica log files: whole, or the last N lines without reading the whole file."""
import os
from pathlib import Path

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
