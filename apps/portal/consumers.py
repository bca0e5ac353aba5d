"""Websocket endpoints of a project.

  ws/projects/<project>/events/  the project's events (workload status changes, ...)
  ws/projects/<project>/live/    the dashboard's one socket per page, multiplexing topics (docs/live.md)

Both sign in and keep checking access through apps.projects.wsauth.ProjectSocket (session cookie
from the site's own pages, or an API token as the subprotocol `cairn.token.<token>` / an
`Authorization: Bearer` header; never in the URL), and check membership before sending anything.

The live socket is a hub: the topics and what they send belong to the apps that own the data,
registered in apps.core.live by their AppConfig.ready() (CONTRIBUTING.md, "Adding a live topic").
"""
import asyncio
import json
import logging
import time

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from apps.core.live import Topic, TopicRefused, find_topic, topic_labels
from apps.core.realtime import project_group
from apps.projects.wsauth import ProjectSocket

from .frames import frame_errors

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
USAGE = 'Send {"action": "subscribe"|"unsubscribe", "topic": "..."}.'


class ProjectLiveConsumer(ProjectSocket, AsyncJsonWebsocketConsumer):
    """ws/projects/<project>/live/: the dashboard's one socket per page, multiplexing the topics
    registered in apps.core.live (workloads, workload:<id>, logs:<id>:<replica>, run:<id>, runs,
    cluster; docs/live.md). Implements apps.core.live.LiveSocket for them."""

    async def connect(self):
        self.topics: dict[str, Topic] = {}
        self.group_refs: dict[str, int] = {}
        if await self.admit():
            await self.open()

    async def disconnect(self, code):
        for name in list(getattr(self, "topics", {})):
            await self.drop(name)

    @property
    def gone(self) -> bool:
        return self._gone

    async def send_json(self, content, close=False):
        """Send a frame; with CAIRN_VALIDATE_LIVE_FRAMES (the tests) only one as declared in
        apps/portal/frames.py."""
        if settings.CAIRN_VALIDATE_LIVE_FRAMES and (errors := frame_errors(content)):
            logger.error("live: frame %r is not as declared: %s", content, "; ".join(errors))
            raise ValueError(f"Live frame {content.get('type')!r} is not as declared: {'; '.join(errors)}")
        await super().send_json(content, close)

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
            await self.drop(topic)
            await self.send_json({"topic": topic, "type": "unsubscribed"})
            return
        await self._subscribe(topic)

    async def _error(self, topic: str | None, detail: str) -> None:
        await self.send_json({"topic": topic, "type": "error", "detail": detail})

    async def _subscribe(self, name: str) -> None:
        found = find_topic(name)
        if found is None:
            await self._error(name, f"Unknown topic. Topics: {', '.join(topic_labels())}.")
            return
        # Access (token, session, membership) was checked again on receiving this message
        # (ProjectSocket.websocket_receive): a removed member's socket is closed before this.
        if name in self.topics:
            await self.send_json({"topic": name, "type": "subscribed"})
            return
        if len(self.topics) >= LIVE_MAX_TOPICS:
            await self._error(name, f"At most {LIVE_MAX_TOPICS} topics per connection; unsubscribe from some first.")
            return
        handler, match = found
        try:
            topic = await handler(self, match)
        except TopicRefused as refused:
            await self._error(name, refused.detail)
            return
        self.topics[name] = topic
        for group in topic.groups:
            self.group_refs[group] = self.group_refs.get(group, 0) + 1
            if self.group_refs[group] == 1:
                await self.channel_layer.group_add(group, self.channel_name)
        await self.send_json({"topic": name, "type": "subscribed"})
        if topic.follow is not None:
            topic.tasks.append(asyncio.ensure_future(self._guard(topic, topic.follow(self))))

    async def drop(self, name: str) -> None:
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

    async def send_frame(self, topic: Topic, frame: dict) -> None:
        if self.topics.get(topic.name) is topic:
            await self.send_json({"topic": topic.name, **frame})

    # -- events from the channel layer -------------------------------------------------------

    async def cairn_event(self, message):
        event = message["event"]
        for topic in list(self.topics.values()):
            for frame in topic.offer(event):
                await self.send_frame(topic, frame)
            if topic.ended:
                await self.drop(topic.name)
            elif topic.flush_task is None and topic.pending():
                topic.flush_task = asyncio.ensure_future(self._flush_later(topic))

    async def _flush_later(self, topic: Topic) -> None:
        interval = 1.0 / topic.fps
        try:
            while topic.pending() and self.topics.get(topic.name) is topic:
                wait = topic.last_sent + interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                frames = topic.take()
                topic.last_sent = time.monotonic()
                for frame in frames:
                    await self.send_frame(topic, frame)  # a slow client holds this; buffers stay bounded
        finally:
            topic.flush_task = None

    async def _guard(self, topic: Topic, work) -> None:
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
                await self.send_frame(topic, {"type": "error", "detail": "This subscription failed; subscribe again."})
                await self.drop(topic.name)
