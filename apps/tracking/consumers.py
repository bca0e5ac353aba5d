"""Live tracking over websockets.

  ws/projects/<project>/runs/<run>/live/  every point of one run as it is ingested
  ws/projects/<project>/runs/live/        the latest value per key of every run of the project

Signs in and keeps checking access through apps.projects.wsauth.ProjectSocket (session cookie, or an
API token as the subprotocol `cairn.token.<token>` / `Authorization: Bearer`; never in the URL):
project membership at connect, on every message and every second. A client may also send
{"action": "subscribe", "run": <id>} / {"action": "unsubscribe", "run": <id>}.
Each subscription sends at most TRACKING_LIVE_MAX_FPS frames per second (coalesced; bursts of
TRACKING_LIVE_BURST_FRAMES) and
buffers at most TRACKING_LIVE_BUFFER_POINTS points while the client is slow (see live.py)."""
from __future__ import annotations

import asyncio
import time

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from apps.projects.wsauth import NOT_FOUND, ProjectSocket

from .conf import setting
from .events import project_runs_group, run_group
from .live import Coalescer


@database_sync_to_async
def _run_in_project(run_id, project_id: int) -> bool:
    from .models import Run

    try:
        return Run.objects.filter(pk=int(run_id), project_id=project_id).exists()
    except (TypeError, ValueError):
        return False


class _Subscription:
    def __init__(self, run_id: int | None, max_points: int):
        self.run_id = run_id
        self.buffer = Coalescer(max_points=max_points)
        # Frame budget (a token bucket): TRACKING_LIVE_MAX_FPS frames per second, of which up to
        # TRACKING_LIVE_BURST_FRAMES may be saved up. With no saving (one frame per 1/fps), a run
        # logging at about the frame rate queues behind its own previous frame: each late batch
        # delays every following one until a gap, adding up to a frame interval of latency.
        self.frames = float(setting("TRACKING_LIVE_BURST_FRAMES"))
        self.frames_at = time.monotonic()
        self.task: asyncio.Task | None = None


class TrackingLiveConsumer(ProjectSocket, AsyncJsonWebsocketConsumer):
    async def dispatch(self, message):
        # Channels runs close_old_connections (a hop to a thread) before every message; live
        # events touch no database, and a busy run sends many per second per subscriber.
        if message.get("type") == "cairn.event":
            await self.cairn_event(message)
            return
        await super().dispatch(message)

    @classmethod
    async def encode_json(cls, content):
        return orjson.dumps(content).decode()

    async def connect(self):
        self.subscriptions: dict[str, _Subscription] = {}
        if not await self.admit():
            return
        run_id = self.scope["url_route"]["kwargs"].get("run")
        if run_id is not None and not await _run_in_project(run_id, self.project_id):
            await self.refuse(NOT_FOUND)
            return
        if run_id is None:
            await self._join(project_runs_group(self.project_id), None)
        else:
            await self._join(run_group(int(run_id)), int(run_id))
        await self.open()

    async def _join(self, group: str, run_id: int | None) -> None:
        if group not in self.subscriptions:
            self.subscriptions[group] = _Subscription(run_id, setting("TRACKING_LIVE_BUFFER_POINTS"))
            await self.channel_layer.group_add(group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        action = content.get("action") if isinstance(content, dict) else None
        run_id = content.get("run") if isinstance(content, dict) else None
        if action not in ("subscribe", "unsubscribe") or isinstance(run_id, bool) or not isinstance(run_id, int):
            await self.send_json({"type": "error", "detail": 'Send {"action": "subscribe"|"unsubscribe", "run": <id>}.'})
            return
        group = run_group(run_id)
        if action == "unsubscribe":
            await self._leave(group)
            await self.send_json({"type": "unsubscribed", "run": run_id})
            return
        # Access was checked again on receiving this message (ProjectSocket.websocket_receive).
        if not await _run_in_project(run_id, self.project_id):
            await self.send_json({"type": "error", "run": run_id, "detail": "Run not found."})
            return
        await self._join(group, run_id)
        await self.send_json({"type": "subscribed", "run": run_id})

    async def _leave(self, group: str) -> None:
        sub = self.subscriptions.pop(group, None)
        if sub is not None:
            if sub.task is not None:
                sub.task.cancel()
            await self.channel_layer.group_discard(group, self.channel_name)

    async def disconnect(self, code):
        for group in list(getattr(self, "subscriptions", {})):
            await self._leave(group)

    async def cairn_event(self, message):
        event = message["event"]
        group = run_group(event["run"]) if event.get("type") == "run.metrics" else None
        sub = self.subscriptions.get(group) if group else None
        if sub is None:  # project-wide subscription, or a status event
            sub = self.subscriptions.get(project_runs_group(self.project_id)) or self.subscriptions.get(
                run_group(event.get("run", -1)))
        if sub is None:
            return
        sub.buffer.add(event)
        if sub.task is None:
            sub.task = asyncio.ensure_future(self._flush_later(sub))

    async def _flush_later(self, sub: _Subscription) -> None:
        fps, burst = setting("TRACKING_LIVE_MAX_FPS"), setting("TRACKING_LIVE_BURST_FRAMES")
        try:
            while sub.buffer:
                now = time.monotonic()
                sub.frames = min(burst, sub.frames + (now - sub.frames_at) * fps)
                sub.frames_at = now
                if sub.frames < 1:
                    await asyncio.sleep((1 - sub.frames) / fps)
                    continue
                sub.frames -= 1
                frames = sub.buffer.take(sub.run_id)
                for frame in frames:
                    await self.send_json(frame)  # a slow client holds this; the buffer stays bounded
        finally:
            sub.task = None
