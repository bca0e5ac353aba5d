"""Websocket endpoints of a project.

  ws/projects/<project>/events/  the project's events (workload status changes, ...)
  ws/projects/<project>/live/    the dashboard's one socket per page, multiplexing topics (docs/live.md)

Both sign in and keep checking access through apps.core.wsauth.ProjectSocket (session cookie
from the site's own pages, or an API token as the subprotocol `cairn.token.<token>` / an
`Authorization: Bearer` header; never in the URL), and check membership before sending anything.
"""
import asyncio
import json
import logging
import re
import time
from collections import deque

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from apps.core.realtime import project_group
from apps.core.wsauth import ProjectSocket

logger = logging.getLogger(__name__)


class ProjectEventsConsumer(ProjectSocket, AsyncJsonWebsocketConsumer):
    async def connect(self):
        if not await self.admit():
            return
        self.group = project_group(self.project_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.open()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def cairn_event(self, message):
        await self.send_json(message["event"])


# -- One websocket per dashboard page: ws/projects/<project>/live/ (docs/live.md) ---------------

LIVE_MAX_TOPICS = 64
LIVE_MAX_MESSAGE_CHARS = 4096
LIVE_STREAM_FPS = 10  # frames per second per streaming topic (logs, telemetry, run metrics)
LIVE_CLUSTER_FPS = 1  # the cluster heatmap: a frame a second is plenty
LIVE_STATE_POLL_SECONDS = 5.0  # workload:<id> re-reads its state this often while not finished
LIVE_LOG_CHECK_SECONDS = 1.0  # logs:<id>:<r> checks status and attempt this often when idle
LIVE_LOG_TAIL_LINES = 500
LIVE_TELEMETRY_BUFFER = 5000  # workload samples held while a client is slow

TOPIC_PATTERN = re.compile(r"^(?:(workloads|runs|cluster)|(workload|run):(\d{1,18})|logs:(\d{1,18}):(\d{1,6}))$")
USAGE = 'Send {"action": "subscribe"|"unsubscribe", "topic": "..."}.'


@database_sync_to_async
def _workload_row(workload_id: int, project_id: int) -> dict | None:
    from apps.workloads.models import Workload

    return (Workload.objects.filter(pk=workload_id, project_id=project_id)
            .values("replicas", "attempt", "status").first())


@database_sync_to_async
def _run_exists(run_id: int, project_id: int) -> bool:
    from apps.tracking.models import Run

    return Run.objects.filter(pk=run_id, project_id=project_id).exists()


@database_sync_to_async
def _workload_state(workload_id: int) -> dict | None:
    from rest_framework.fields import DateTimeField

    from apps.workloads.choices import WorkloadStatus
    from apps.workloads.models import Workload

    w = Workload.objects.filter(pk=workload_id).only(
        "status", "status_reason", "status_message", "pending_reason", "waiting_on", "estimated_start", "queue_position",
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
        "queue_position": w.queue_position if queued else None,
        "attempt": w.attempt, "replicas": w.replicas, "preemptions": w.preemptions, "exit_code": w.exit_code,
        "placement": w.placement, "conditions": w.conditions, "updated_at": when.to_representation(w.updated_at),
    }


@database_sync_to_async
def _log_progress(workload_id: int) -> tuple[str, int] | None:
    from apps.workloads.models import Workload

    row = Workload.objects.filter(pk=workload_id).values_list("status", "attempt").first()
    return tuple(row) if row else None


@database_sync_to_async
def _gpu_memory_by_node() -> dict[str, int]:
    from apps.clusters.models import Node

    return dict(Node.objects.filter(gpu_memory_mb__gt=0).values_list("name", "gpu_memory_mb"))


class _Topic:
    """One subscription of a live socket: the groups it listens to, what it sends at once
    (`offer` returns frames), what it merges for the next frame (`pending` / `take`)."""

    fps = LIVE_STREAM_FPS
    groups: tuple[str, ...] = ()

    def __init__(self, name: str):
        self.name = name
        self.ended = False  # the subscription is over (deleted workload, finished log)
        self.last_sent = 0.0
        self.flush_task: asyncio.Task | None = None
        self.tasks: list[asyncio.Task] = []

    def offer(self, event: dict) -> list[dict]:
        return []

    def pending(self) -> bool:
        return False

    def take(self) -> list[dict]:
        return []


class _WorkloadsTopic(_Topic):
    TYPES = frozenset({"workload.created", "workload.status", "workload.deleted"})

    def __init__(self, name: str, project_id: int):
        super().__init__(name)
        self.groups = (project_group(project_id),)

    def offer(self, event):
        return [event] if event.get("type") in self.TYPES else []


class _WorkloadTopic(_Topic):
    def __init__(self, name: str, project_id: int, workload_id: int):
        from apps.telemetry.events import workload_telemetry_group

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


class _RunTopicBase(_Topic):
    """run:<id> and runs: the tracking Coalescer; a status is sent once even though tracking
    publishes it to both the run's group and the project's runs group."""

    def __init__(self, name: str):
        from apps.tracking.conf import setting as tracking_setting
        from apps.tracking.live import Coalescer

        super().__init__(name)
        self.fps = tracking_setting("TRACKING_LIVE_MAX_FPS")
        self.buffer = Coalescer(max_points=tracking_setting("TRACKING_LIVE_BUFFER_POINTS"))
        self.statuses: dict[int, str] = {}

    def pending(self):
        return bool(self.buffer)

    def _take(self, run_id: int | None) -> list[dict]:
        frames = []
        for frame in self.buffer.take(run_id):
            if frame.get("type") == "run.status":
                if self.statuses.get(frame["run"]) == frame["status"]:
                    continue
                self.statuses[frame["run"]] = frame["status"]
            frames.append(frame)
        return frames


class _RunTopic(_RunTopicBase):
    def __init__(self, name: str, run_id: int):
        from apps.tracking.events import run_group

        super().__init__(name)
        self.run_id = run_id
        self.groups = (run_group(run_id),)

    def offer(self, event):
        if event.get("type") in ("run.metrics", "run.status") and event.get("run") == self.run_id:
            self.buffer.add(event)
        return []

    def take(self):
        return self._take(self.run_id)


class _RunsTopic(_RunTopicBase):
    def __init__(self, name: str, project_id: int):
        from apps.tracking.events import project_runs_group

        super().__init__(name)
        self.groups = (project_runs_group(project_id),)

    def offer(self, event):
        if event.get("type") in ("run.latest", "run.status"):
            self.buffer.add(event)
        return []

    def take(self):
        return self._take(None)


class _ClusterTopic(_Topic):
    fps = LIVE_CLUSTER_FPS

    def __init__(self, name: str, gpu_memory_mb: dict[str, int]):
        from apps.clusters.events import NODE_CHANGES_GROUP
        from apps.telemetry.events import NODES_GROUP
        from apps.telemetry.live import ClusterFrames

        super().__init__(name)
        self.groups = (NODES_GROUP, NODE_CHANGES_GROUP)
        self.frames = ClusterFrames(gpu_memory_mb=gpu_memory_mb)

    def offer(self, event):
        kind = event.get("type")
        if kind == "telemetry.nodes":
            self.frames.add(event.get("samples") or [])
        elif kind == "node.changed":
            return [event]
        return []

    def pending(self):
        return bool(self.frames)

    def take(self):
        return self.frames.take()


class _LogsTopic(_Topic):
    def __init__(self, name: str, reader):
        super().__init__(name)
        self.tail = reader  # a LogReader from the workload's backend (apps.backends.base)


@database_sync_to_async
def _open_log_reader(workload_id: int, replica: int, attempt: int):
    from apps.workloads.api.logtail import open_log_reader

    return open_log_reader(workload_id=workload_id, replica=replica, attempt=attempt, tail=LIVE_LOG_TAIL_LINES)


class ProjectLiveConsumer(ProjectSocket, AsyncJsonWebsocketConsumer):
    """ws/projects/<project>/live/: the dashboard's one socket per page, multiplexing topics
    (workloads, workload:<id>, logs:<id>:<replica>, run:<id>, runs, cluster; docs/live.md)."""

    async def connect(self):
        self.topics: dict[str, _Topic] = {}
        self.group_refs: dict[str, int] = {}
        if await self.admit():
            await self.open()

    async def disconnect(self, code):
        for name in list(getattr(self, "topics", {})):
            await self._drop(name)

    # -- client messages ---------------------------------------------------------------------

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        if text_data is None or len(text_data) > LIVE_MAX_MESSAGE_CHARS:
            await self._error(None, f"Messages are JSON text of at most {LIVE_MAX_MESSAGE_CHARS} characters. {USAGE}")
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._error(None, f"Not JSON. {USAGE}")
            return
        await self.receive_json(content)

    async def receive_json(self, content, **kwargs):
        action = content.get("action") if isinstance(content, dict) else None
        topic = content.get("topic") if isinstance(content, dict) else None
        if action not in ("subscribe", "unsubscribe") or not isinstance(topic, str) or len(topic) > 100:
            await self._error(topic if isinstance(topic, str) and len(topic) <= 100 else None, USAGE)
            return
        if action == "unsubscribe":
            await self._drop(topic)
            await self.send_json({"topic": topic, "type": "unsubscribed"})
            return
        await self._subscribe(topic)

    async def _error(self, topic: str | None, detail: str) -> None:
        await self.send_json({"topic": topic, "type": "error", "detail": detail})

    async def _subscribe(self, name: str) -> None:
        match = TOPIC_PATTERN.match(name)
        if match is None:
            await self._error(name, "Unknown topic. Topics: workloads, workload:<id>, logs:<id>:<replica>, "
                                    "run:<id>, runs, cluster.")
            return
        # Access (token, session, membership) was checked again on receiving this message
        # (ProjectSocket.websocket_receive): a removed member's socket is closed before this.
        project_id = self.project_id
        if name in self.topics:
            await self.send_json({"topic": name, "type": "subscribed"})
            return
        if len(self.topics) >= LIVE_MAX_TOPICS:
            await self._error(name, f"At most {LIVE_MAX_TOPICS} topics per connection; unsubscribe from some first.")
            return
        simple, kind, ident, log_workload, log_replica = match.groups()
        topic: _Topic
        if simple == "workloads":
            topic = _WorkloadsTopic(name, project_id)
        elif simple == "runs":
            topic = _RunsTopic(name, project_id)
        elif simple == "cluster":
            topic = _ClusterTopic(name, await _gpu_memory_by_node())
        elif kind == "run":
            if not await _run_exists(int(ident), project_id):
                await self._error(name, f"Run {int(ident)} not found in project '{self.slug}'.")
                return
            topic = _RunTopic(name, int(ident))
        else:
            workload_id = int(ident if kind == "workload" else log_workload)
            row = await _workload_row(workload_id, project_id)
            if row is None:
                await self._error(name, f"Workload {workload_id} not found in project '{self.slug}'.")
                return
            if kind == "workload":
                topic = _WorkloadTopic(name, project_id, workload_id)
            else:
                replica = int(log_replica)
                if replica >= row["replicas"]:
                    await self._error(name, f"Replica {replica} does not exist; this workload has {row['replicas']}.")
                    return
                reader = await _open_log_reader(workload_id, replica, row["attempt"])
                if reader is None:
                    await self._error(name, f"Workload {workload_id} not found in project '{self.slug}'.")
                    return
                topic = _LogsTopic(name, reader)
        self.topics[name] = topic
        for group in topic.groups:
            self.group_refs[group] = self.group_refs.get(group, 0) + 1
            if self.group_refs[group] == 1:
                await self.channel_layer.group_add(group, self.channel_name)
        await self.send_json({"topic": name, "type": "subscribed"})
        if isinstance(topic, _WorkloadTopic):
            topic.tasks.append(asyncio.ensure_future(self._guard(topic, self._follow_state(topic))))
        elif isinstance(topic, _LogsTopic):
            topic.tasks.append(asyncio.ensure_future(self._guard(topic, self._follow_logs(topic))))

    async def _drop(self, name: str) -> None:
        """End a subscription: stop its tasks, leave the groups no other topic needs."""
        topic = self.topics.pop(name, None)
        if topic is None:
            return
        current = asyncio.current_task()
        for task in [*topic.tasks, topic.flush_task]:
            if task is not None and task is not current:
                task.cancel()
        for group in topic.groups:
            self.group_refs[group] -= 1
            if self.group_refs[group] == 0:
                del self.group_refs[group]
                await self.channel_layer.group_discard(group, self.channel_name)

    async def _send(self, topic: _Topic, frame: dict) -> None:
        if self.topics.get(topic.name) is topic:
            await self.send_json({"topic": topic.name, **frame})

    # -- events from the channel layer -------------------------------------------------------

    async def cairn_event(self, message):
        event = message["event"]
        for topic in list(self.topics.values()):
            for frame in topic.offer(event):
                await self._send(topic, frame)
            if topic.ended:
                await self._drop(topic.name)
            elif topic.flush_task is None and topic.pending():
                topic.flush_task = asyncio.ensure_future(self._flush_later(topic))

    async def _flush_later(self, topic: _Topic) -> None:
        interval = 1.0 / topic.fps
        try:
            while topic.pending() and self.topics.get(topic.name) is topic:
                wait = topic.last_sent + interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                frames = topic.take()
                topic.last_sent = time.monotonic()
                for frame in frames:
                    await self._send(topic, frame)  # a slow client holds this; buffers stay bounded
        finally:
            topic.flush_task = None

    # -- per-topic loops -----------------------------------------------------------------------

    async def _guard(self, topic: _Topic, work) -> None:
        """Run a topic's loop; an unexpected failure ends that subscription, never the socket. A
        client that goes away is no failure: its topics end quietly (sends to a closed socket are
        dropped by ProjectSocket, and the loops stop)."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            if self._gone:
                return
            logger.exception("live: topic %s failed", topic.name)
            if self.topics.get(topic.name) is topic:
                await self._send(topic, {"type": "error", "detail": "This subscription failed; subscribe again."})
                await self._drop(topic.name)

    async def _follow_state(self, topic: _WorkloadTopic) -> None:
        """Send workload.state now and whenever it changes: after the workload's own events, and
        every LIVE_STATE_POLL_SECONDS (the scheduler updates pending reasons without events)."""
        from apps.workloads.choices import TERMINAL

        last = None
        while not self._gone:
            topic.refresh.clear()
            state = await _workload_state(topic.workload_id)
            if state is None:  # deleted behind our back (e.g. in the admin)
                await self._send(topic, {"type": "workload.deleted", "workload": topic.workload_id})
                await self._drop(topic.name)
                return
            if state != last:
                await self._send(topic, state)
                last = state
            if state["status"] in TERMINAL:
                return  # a finished workload changes no more
            try:
                await asyncio.wait_for(topic.refresh.wait(), timeout=LIVE_STATE_POLL_SECONDS)
            except TimeoutError:
                pass

    async def _follow_logs(self, topic: _LogsTopic) -> None:
        """tail -f of one replica through its backend's LogReader: read in a worker thread, at
        most LIVE_STREAM_FPS frames a second; after a restart carry on with the new attempt; end
        once the workload has finished and its log is drained (those last reads are `final`: a
        reader that polls a remote log looks again instead of waiting for its next poll)."""
        from apps.workloads.choices import TERMINAL

        tail = topic.tail
        interval = 1.0 / LIVE_STREAM_FPS
        checked = float("-inf")
        switch_to: int | None = None
        finished: str | None = None
        while not self._gone:
            text = await asyncio.to_thread(tail.read, final=switch_to is not None or finished is not None)
            if text:
                await self._send(topic, {"type": "logs", "attempt": tail.attempt, "text": text})
            elif switch_to is not None:  # the old attempt is drained
                rest = tail.switch(switch_to)
                if rest:
                    await self._send(topic, {"type": "logs", "attempt": tail.attempt, "text": rest})
                switch_to = None
                continue
            elif finished is not None:
                rest = tail.finish()
                if rest:
                    await self._send(topic, {"type": "logs", "attempt": tail.attempt, "text": rest})
                await self._send(topic, {"type": "logs.end", "status": finished})
                await self._drop(topic.name)
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
