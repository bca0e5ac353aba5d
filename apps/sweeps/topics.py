"""The live topics of sweeps on the dashboard's socket (docs/live.md), registered in
SweepsConfig.ready():

  sweeps      the project's sweeps: created, status changes, deleted, and "sweep.trials" (one
              frame per sweep whose trials changed, for the counts and best value of the list)
  sweep:<id>  one sweep: its status changes, its trials' changes (asked, running, a new
              intermediate value, ended) and its deletion, which ends the subscription

Frames say what changed ({"type": "sweep.trial", "sweep": 3, "trial": 5, "status": "running"});
the page re-reads the rows through the API. Changes are merged per sweep and trial (the last
status wins) and sent at most SWEEP_LIVE_FPS times a second: a sweep reporting many steps at once
costs the page one re-read, not one per step.
"""
from __future__ import annotations

from channels.db import database_sync_to_async

from apps.core.live import LiveSocket, Topic, TopicRefused, register_topic

from .events import sweeps_group
from .models import Sweep

SWEEP_LIVE_FPS = 2


class _Merging(Topic):
    """Keeps the latest event per (type, sweep, trial) until the next frame."""

    fps = SWEEP_LIVE_FPS
    TYPES: frozenset[str] = frozenset()  # what it takes from the group

    def __init__(self, name: str, project_id: int):
        super().__init__(name)
        self.groups = (sweeps_group(project_id),)
        self.merged: dict[tuple, dict] = {}

    def wanted(self, event: dict) -> bool:
        return event.get("type") in self.TYPES

    def offer(self, event):
        return self.merge(event) if self.wanted(event) else []

    def merge(self, event: dict) -> list[dict]:
        if event["type"] == "sweep.deleted":  # at once: nothing later about it matters
            self.merged = {k: v for k, v in self.merged.items() if k[1] != event.get("sweep")}
            return [event]
        self.merged[(event["type"], event.get("sweep"), event.get("trial"))] = event
        return []

    def pending(self):
        return bool(self.merged)

    def take(self):
        frames = list(self.merged.values())
        self.merged.clear()
        return frames


class SweepsTopic(_Merging):
    TYPES = frozenset({"sweep.changed", "sweep.trial", "sweep.deleted"})

    def merge(self, event):
        if event["type"] == "sweep.trial":  # the list shows counts, not trials: one frame per sweep
            event = {"type": "sweep.trials", "sweep": event.get("sweep")}
        return super().merge(event)


class SweepTopic(_Merging):
    TYPES = frozenset({"sweep.changed", "sweep.trial", "sweep.deleted"})

    def __init__(self, name: str, project_id: int, sweep_id: int):
        super().__init__(name, project_id)
        self.sweep_id = sweep_id

    def wanted(self, event):
        return super().wanted(event) and event.get("sweep") == self.sweep_id

    def offer(self, event):
        frames = super().offer(event)
        if frames:  # deleted: the subscription is over
            self.ended = True
        return frames


@database_sync_to_async
def _sweep_exists(sweep_id: int, project_id: int) -> bool:
    return Sweep.objects.filter(pk=sweep_id, project_id=project_id).exists()


async def _sweeps(socket: LiveSocket, match) -> Topic:
    return SweepsTopic(match.string, socket.project_id)


async def _sweep(socket: LiveSocket, match) -> Topic:
    sweep_id = int(match[1])
    if not await _sweep_exists(sweep_id, socket.project_id):
        raise TopicRefused(f"Sweep {sweep_id} not found in project '{socket.slug}'.")
    return SweepTopic(match.string, socket.project_id, sweep_id)


def register_topics() -> None:
    register_topic("sweeps", r"sweeps", _sweeps)
    register_topic("sweep:<id>", r"sweep:(\d{1,18})", _sweep)
