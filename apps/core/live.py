"""The live topics of the dashboard's socket (ws/projects/<project>/live/, docs/live.md): the
registry the hub routes through, and what a topic is.

Each app that owns data registers its topics in its `AppConfig.ready()` (workloads: `workloads`,
`workload:<id>`; backends: `logs:<id>:<r>`; tracking: `runs`, `run:<id>`; telemetry: `cluster`;
sweeps: `sweeps`, `sweep:<id>`).
The hub (apps.portal.consumers) only authenticates, parses subscribe/unsubscribe, looks the topic
up here, enforces its limits and routes channel-layer events to the subscriptions. No I/O here.

A handler is `async def handler(socket, match) -> Topic`: `match` is the topic name matched
against the registered pattern, `socket` the hub (LiveSocket: project_id, slug, send_frame, drop, gone).
It checks what it must (the run exists in the project, ...) and raises TopicRefused(detail) to
answer with an error frame; it reads the database through `database_sync_to_async`.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

LIVE_STREAM_FPS = 10  # frames per second per streaming topic (logs, telemetry, run metrics)


class TopicRefused(Exception):
    """A subscription the handler turns down; `detail` goes to the client as an error frame."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class LiveSocket(Protocol):
    """What a topic may use of the hub."""

    project_id: int
    slug: str

    @property
    def gone(self) -> bool: ...  # the client left or was refused: loops stop

    async def send_frame(self, topic: Topic, frame: dict) -> None: ...  # dropped once unsubscribed

    async def drop(self, name: str) -> None: ...  # end a subscription (its tasks, its groups)


class Topic:
    """One subscription of a live socket: the channel-layer groups it listens to, what it sends
    at once of an event (`offer` returns frames), what it merges for the next frame (`pending` /
    `take`, sent at most `fps` times a second), and optionally a loop of its own (`follow`, run
    by the hub after `subscribed`; a failure there ends the subscription, never the socket).
    Set `ended` to have the hub drop the subscription after an event."""

    fps = LIVE_STREAM_FPS
    groups: tuple[str, ...] = ()
    follow: Callable[[LiveSocket], Awaitable[None]] | None = None

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


TopicHandler = Callable[[LiveSocket, re.Match], Awaitable[Topic]]


@dataclass(frozen=True)
class _Entry:
    label: str  # as the unknown-topic error lists it: "logs:<id>:<replica>"
    pattern: re.Pattern
    handler: TopicHandler


_registry: dict[str, _Entry] = {}


def register_topic(label: str, pattern: str, handler: TopicHandler) -> None:
    """Route topic names matching `pattern` (anchored as `^(?:pattern)$`) to `handler`. Called
    from AppConfig.ready(); registering a label again replaces it. Patterns must not overlap."""
    _registry[label] = _Entry(label, re.compile(f"^(?:{pattern})$"), handler)


def unregister_topic(label: str) -> None:
    _registry.pop(label, None)


def find_topic(name: str) -> tuple[TopicHandler, re.Match] | None:
    for entry in _registry.values():
        match = entry.pattern.match(name)
        if match is not None:
            return entry.handler, match
    return None


def topic_labels() -> list[str]:
    """The registered topics, in registration order (INSTALLED_APPS order)."""
    return list(_registry)
