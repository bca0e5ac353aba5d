"""Following one replica's log, for `GET .../logs/?follow=1` (`follow_log`) and for the live
websocket topic `logs:<id>:<r>` (apps/backends/topics.py), through the backend of the workload's
cluster: `open_log_reader` asks the backends, through the seam of apps/workloads/logs.py, for a
LogReader (a local log file, a pod's log over the Kubernetes API, ...).

A LogReader reads one bounded step at a time and never touches the database; the callers read in
worker threads, check the workload's status and attempt themselves, and stop by simply not
reading again. `follow_log` is that loop as an async generator: Django's ASGI handler sends each
piece as it is yielded and cancels the generator when the client goes away."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async

from apps.workloads.choices import TERMINAL
from apps.workloads.logs import log_access
from apps.workloads.models import Workload


def open_log_reader(*, workload_id: int, replica: int, attempt: int, tail: int | None):
    """A reader of one replica's log of `attempt`, starting with its last `tail` lines (None: all),
    from the workload's backend (apps.workloads.logs); None when the workload does not exist.
    Reads the database."""
    workload = Workload.objects.select_related("pool__cluster", "project").filter(pk=workload_id).first()
    if workload is None:
        return None
    return log_access["reader"](workload=workload, replica=replica, attempt=attempt, tail=tail)


FOLLOW_POLL_SECONDS = 0.25  # how often a follow with nothing new reads again and looks at the status


async def follow_log(*, workload_id: int, replica: int, attempt: int | None, tail: int | None,
                     poll_seconds: float = FOLLOW_POLL_SECONDS) -> AsyncIterator[str]:
    """Yield one replica's log as it is written, starting with its last `tail` lines (None: from
    the beginning); end once the workload is finished and the log drained.

    With attempt None it follows the latest attempt: after a restart it carries on with the new
    attempt's log from its beginning; a given attempt ends once a later one has started. Reads
    and the status check run in worker threads; the waits are asyncio sleeps, so a client that
    disconnects cancels this generator at once."""

    @sync_to_async
    def state() -> dict | None:
        return Workload.objects.filter(pk=workload_id).values("status", "attempt").first()

    row = await state()
    if row is None:
        return
    follow_latest = attempt is None
    reader = await sync_to_async(open_log_reader)(
        workload_id=workload_id, replica=replica, attempt=row["attempt"] if follow_latest else attempt, tail=tail)
    if reader is None:
        return

    async def read(*, final: bool = False) -> str:
        return await asyncio.to_thread(reader.read, final=final)

    async def drain() -> AsyncIterator[str]:
        while text := await read(final=True):
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
