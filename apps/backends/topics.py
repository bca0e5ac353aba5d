"""The live topic of logs (docs/live.md), registered in BackendsConfig.ready():

  logs:<id>:<r>   tail -f of one replica's log through the workload's backend (its LogReader),
                  carrying on across restarts, ending with `logs.end` once the workload finished

Here and not in workloads because the log comes from the backend (`backend_for(workload)`).
"""
from __future__ import annotations

import asyncio
import time

from channels.db import database_sync_to_async

from apps.core.live import LIVE_STREAM_FPS, LiveSocket, Topic, TopicRefused, register_topic
from apps.workloads.api.logtail import open_log_reader
from apps.workloads.choices import TERMINAL
from apps.workloads.models import Workload
from apps.workloads.topics import workload_in_project

LIVE_LOG_CHECK_SECONDS = 1.0  # logs:<id>:<r> checks status and attempt this often when idle
LIVE_LOG_TAIL_LINES = 500


@database_sync_to_async
def _log_progress(workload_id: int) -> tuple[str, int] | None:
    row = Workload.objects.filter(pk=workload_id).values_list("status", "attempt").first()
    return tuple(row) if row else None


@database_sync_to_async
def _open_log_reader(workload_id: int, replica: int, attempt: int):
    return open_log_reader(workload_id=workload_id, replica=replica, attempt=attempt, tail=LIVE_LOG_TAIL_LINES)


class LogsTopic(Topic):
    def __init__(self, name: str, reader):
        super().__init__(name)
        self.tail = reader  # a LogReader from the workload's backend (apps.backends.base)

    async def follow(self, socket: LiveSocket) -> None:
        """tail -f of one replica through its backend's LogReader: read in a worker thread, at
        most LIVE_STREAM_FPS frames a second; after a restart carry on with the new attempt; end
        once the workload has finished and its log is drained (those last reads are `final`: a
        reader that polls a remote log looks again instead of waiting for its next poll)."""
        tail = self.tail
        interval = 1.0 / LIVE_STREAM_FPS
        checked = float("-inf")
        switch_to: int | None = None
        finished: str | None = None
        while not socket.gone:
            text = await asyncio.to_thread(tail.read, final=switch_to is not None or finished is not None)
            if text:
                await socket.send_frame(self, {"type": "logs", "attempt": tail.attempt, "text": text})
            elif switch_to is not None:  # the old attempt is drained
                rest = tail.switch(switch_to)
                if rest:
                    await socket.send_frame(self, {"type": "logs", "attempt": tail.attempt, "text": rest})
                switch_to = None
                continue
            elif finished is not None:
                rest = tail.finish()
                if rest:
                    await socket.send_frame(self, {"type": "logs", "attempt": tail.attempt, "text": rest})
                await socket.send_frame(self, {"type": "logs.end", "status": finished})
                await socket.drop(self.name)
                return
            elif time.monotonic() - checked >= LIVE_LOG_CHECK_SECONDS:
                checked = time.monotonic()
                progress = await _log_progress(tail.workload_id)
                if progress is None:
                    finished = "deleted"
                    continue
                status, attempt = progress
                if attempt > tail.attempt:
                    switch_to = attempt
                    continue
                if status in TERMINAL:
                    finished = status
                    continue
            await asyncio.sleep(interval)


async def _logs(socket: LiveSocket, match) -> Topic:
    workload_id, replica = int(match[1]), int(match[2])
    row = await workload_in_project(socket, workload_id)
    if replica >= row["replicas"]:
        raise TopicRefused(f"Replica {replica} does not exist; this workload has {row['replicas']}.")
    reader = await _open_log_reader(workload_id, replica, row["attempt"])
    if reader is None:
        raise TopicRefused(f"Workload {workload_id} not found in project '{socket.slug}'.")
    return LogsTopic(match.string, reader)


def register_topics() -> None:
    register_topic("logs:<id>:<replica>", r"logs:(\d{1,18}):(\d{1,6})", _logs)
