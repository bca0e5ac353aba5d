"""Reads: the captured output (stdout + stderr) of a workload's replicas."""
import codecs
import os
import time
from collections.abc import Iterator

from apps.workloads.choices import TERMINAL
from apps.workloads.models import Workload

from .local.logs import read_log, tail_bytes
from .local.paths import replica_log_path

_CHUNK = 256 * 1024


def workload_log_read(*, workload: Workload, replica: int = 0, attempt: int | None = None, tail: int | None = None) -> str:
    """The log of one replica of one attempt (None: the latest); tail = only the last N lines.

    '' when there is nothing (not started yet, no such replica or attempt).
    """
    attempt = workload.attempt if attempt is None else attempt
    if attempt < 1 or replica < 0:
        return ""
    return read_log(replica_log_path(workload.pk, attempt, replica), tail=tail)


def workload_log_follow(
    *, workload: Workload, replica: int = 0, attempt: int | None = None, tail: int | None = None,
    poll_seconds: float = 0.5,
) -> Iterator[str]:
    """Yield the log as it is written (like `tail -f`), starting with the last `tail` lines
    (None: from the beginning). Ends once the workload is terminal and the file is drained.

    With attempt None it follows the latest attempt: after a restart it carries on with the new
    attempt's log; a given attempt ends once a later one has started. Checks the workload's status in the database when there is nothing new.
    """
    follow_latest = attempt is None
    current = workload.attempt if follow_latest else attempt
    status = workload.status
    position = None  # byte offset read so far in the current file; None = not opened yet
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read_more() -> str:
        nonlocal position
        if current < 1:
            return ""
        try:
            with open(replica_log_path(workload.pk, current, replica), "rb") as f:
                if position is None:
                    end = os.fstat(f.fileno()).st_size
                    data = tail_bytes(f, end=end, lines=tail) if tail is not None else f.read(end)
                    position = end
                else:
                    f.seek(position)
                    data = f.read(_CHUNK)
                    position += len(data)
        except (FileNotFoundError, NotADirectoryError):
            return ""
        return decoder.decode(data)

    while True:
        text = read_more()
        if text:
            yield text
            continue
        row = Workload.objects.filter(pk=workload.pk).values("status", "attempt").first()
        if row is None:
            break
        status = row["status"]
        if not follow_latest and row["attempt"] > current:
            yield from _drain(read_more)  # the attempt asked for is over
            break
        if follow_latest and row["attempt"] > current:
            # The replicas of the old attempt are gone before a new one starts: drain, switch.
            yield from _drain(read_more)
            rest = decoder.decode(b"", final=True)
            if rest:
                yield rest
            current, position, tail = row["attempt"], None, None
            decoder.reset()
            continue
        if status in TERMINAL:
            yield from _drain(read_more)
            break
        time.sleep(poll_seconds)
    rest = decoder.decode(b"", final=True)
    if rest:
        yield rest


def _drain(read_more) -> Iterator[str]:
    while text := read_more():
        yield text
