"""The live topics of workloads (docs/live.md), registered in WorkloadsConfig.ready():

  workloads       the project's workload list: created, status changes, deleted
  workload:<id>   one workload: its state now and on every change, its events and status, and
                  its telemetry samples (merged, at most LIVE_STREAM_FPS frames a second)
"""
from __future__ import annotations

import asyncio
from collections import deque

from channels.db import database_sync_to_async
from rest_framework.fields import DateTimeField

from apps.clusters.selectors import QueuePositions
from apps.core.live import LiveSocket, Topic, TopicRefused, register_topic
from apps.core.realtime import project_group, workload_telemetry_group

from .choices import TERMINAL, WorkloadStatus
from .models import Workload

LIVE_STATE_POLL_SECONDS = 5.0  # workload:<id> re-reads its state this often while not finished
LIVE_TELEMETRY_BUFFER = 5000  # workload samples held while a client is slow


@database_sync_to_async
def workload_row(workload_id: int, project_id: int) -> dict | None:
    return (Workload.objects.filter(pk=workload_id, project_id=project_id)
            .values("replicas", "attempt", "status").first())


async def workload_in_project(socket: LiveSocket, workload_id: int) -> dict:
    """The workload's row (replicas, attempt, status), or TopicRefused when it is not the project's."""
    row = await workload_row(workload_id, socket.project_id)
    if row is None:
        raise TopicRefused(f"Workload {workload_id} not found in project '{socket.slug}'.")
    return row


@database_sync_to_async
def _workload_state(workload_id: int) -> dict | None:
    w = Workload.objects.filter(pk=workload_id).only(
        "status", "status_reason", "status_message", "pending_reason", "waiting_on", "estimated_start", "pool_id",
        "attempt", "replicas", "preemptions", "exit_code", "placement", "conditions", "updated_at").first()
    if w is None:
        return None
    when = DateTimeField()
    queued = w.status == WorkloadStatus.QUEUED
    return {
        "type": "workload.state", "workload": w.pk, "status": w.status, "status_reason": w.status_reason,
        "status_message": w.status_message, "pending_reason": w.pending_reason,
        "waiting_on": w.waiting_on or None,
        "estimated_start": when.to_representation(w.estimated_start) if queued and w.estimated_start else None,
        "queue_position": QueuePositions().of(pool_id=w.pool_id, workload_id=w.pk) if queued else None,
        "attempt": w.attempt, "replicas": w.replicas, "preemptions": w.preemptions, "exit_code": w.exit_code,
        "placement": w.placement, "conditions": w.conditions, "updated_at": when.to_representation(w.updated_at),
    }


class WorkloadsTopic(Topic):
    TYPES = frozenset({"workload.created", "workload.status", "workload.deleted"})

    def __init__(self, name: str, project_id: int):
        super().__init__(name)
        self.groups = (project_group(project_id),)

    def offer(self, event):
        return [event] if event.get("type") in self.TYPES else []


class WorkloadTopic(Topic):
    def __init__(self, name: str, project_id: int, workload_id: int):
        super().__init__(name)
        self.workload_id = workload_id
        self.groups = (project_group(project_id), workload_telemetry_group(workload_id))
        self.refresh = asyncio.Event()
        self.samples: deque = deque()
        self.dropped = 0

    def offer(self, event):
        if event.get("workload") != self.workload_id:
            return []
        kind = event.get("type")
        if kind in ("workload.status", "workload.event"):
            self.refresh.set()
            return [event]
        if kind == "workload.deleted":
            self.ended = True
            return [event]
        if kind == "workload.telemetry":
            self.samples.extend(event.get("samples") or [])
            while len(self.samples) > LIVE_TELEMETRY_BUFFER:
                self.samples.popleft()
                self.dropped += 1
        return []

    def pending(self):
        return bool(self.samples)

    def take(self):
        frame = {"type": "workload.telemetry", "workload": self.workload_id, "samples": list(self.samples)}
        if self.dropped:
            frame["dropped"] = self.dropped
        self.samples.clear()
        self.dropped = 0
        return [frame]

    async def follow(self, socket: LiveSocket) -> None:
        """Send workload.state now and whenever it changes: after the workload's own events, and
        every LIVE_STATE_POLL_SECONDS (the scheduler updates pending reasons without events)."""
        last = None
        while not socket.gone:
            self.refresh.clear()
            state = await _workload_state(self.workload_id)
            if state is None:  # deleted behind our back (e.g. in the admin)
                await socket.send_frame(self, {"type": "workload.deleted", "workload": self.workload_id})
                await socket.drop(self.name)
                return
            if state != last:
                await socket.send_frame(self, state)
                last = state
            if state["status"] in TERMINAL:
                return  # a finished workload changes no more
            try:
                await asyncio.wait_for(self.refresh.wait(), timeout=LIVE_STATE_POLL_SECONDS)
            except TimeoutError:
                pass


async def _workloads(socket: LiveSocket, match) -> Topic:
    return WorkloadsTopic(match.string, socket.project_id)


async def _workload(socket: LiveSocket, match) -> Topic:
    workload_id = int(match[1])
    await workload_in_project(socket, workload_id)
    return WorkloadTopic(match.string, socket.project_id, workload_id)


def register_topics() -> None:
    register_topic("workloads", r"workloads", _workloads)
    register_topic("workload:<id>", r"workload:(\d{1,18})", _workload)
