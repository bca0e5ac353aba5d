"""The live topics of tracking on the dashboard's socket (docs/live.md), registered in
TrackingConfig.ready():

  runs       the project's runs: latest values and statuses (for run tables and sparklines)
  run:<id>   one run: its metric points and status

Both merge through the tracking Coalescer (apps.tracking.live) and send at most
TRACKING_LIVE_MAX_FPS frames a second; a status is sent once even though tracking publishes it
to both the run's group and the project's runs group.
"""
from __future__ import annotations

from channels.db import database_sync_to_async

from apps.core.live import LiveSocket, Topic, TopicRefused, register_topic

from .conf import setting as tracking_setting
from .events import project_runs_group, run_group
from .live import Coalescer
from .models import Run


@database_sync_to_async
def _run_exists(run_id: int, project_id: int) -> bool:
    return Run.objects.filter(pk=run_id, project_id=project_id).exists()


class _RunTopicBase(Topic):
    def __init__(self, name: str):
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


class RunTopic(_RunTopicBase):
    def __init__(self, name: str, run_id: int):
        super().__init__(name)
        self.run_id = run_id
        self.groups = (run_group(run_id),)

    def offer(self, event):
        if event.get("type") in ("run.metrics", "run.status") and event.get("run") == self.run_id:
            self.buffer.add(event)
        return []

    def take(self):
        return self._take(self.run_id)


class RunsTopic(_RunTopicBase):
    def __init__(self, name: str, project_id: int):
        super().__init__(name)
        self.groups = (project_runs_group(project_id),)

    def offer(self, event):
        if event.get("type") in ("run.latest", "run.status"):
            self.buffer.add(event)
        return []

    def take(self):
        return self._take(None)


async def _run(socket: LiveSocket, match) -> Topic:
    run_id = int(match[1])
    if not await _run_exists(run_id, socket.project_id):
        raise TopicRefused(f"Run {run_id} not found in project '{socket.slug}'.")
    return RunTopic(match.string, run_id)


async def _runs(socket: LiveSocket, match) -> Topic:
    return RunsTopic(match.string, socket.project_id)


def register_topics() -> None:
    register_topic("run:<id>", r"run:(\d{1,18})", _run)
    register_topic("runs", r"runs", _runs)
