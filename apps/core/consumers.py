"""Websocket endpoint for a project's live events (workload status changes, ...).

Authenticates like the API (session cookie, or `Authorization: Bearer` header / `?token=`)
and checks membership before joining the project's group.
"""
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from .realtime import project_group


@database_sync_to_async
def _resolve(scope) -> tuple[object, int | None]:
    from apps.accounts.selectors import user_from_token
    from apps.projects.selectors import membership_role

    user = scope.get("user")
    if user is None or not user.is_authenticated:
        token = None
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                token = value.decode("latin-1").removeprefix("Bearer ").strip()
        if token is None:
            token = (parse_qs(scope.get("query_string", b"").decode()).get("token") or [None])[0]
        user = user_from_token(token) if token else None
    if user is None or not user.is_authenticated:
        return None, None
    slug = scope["url_route"]["kwargs"]["project"]
    from apps.projects.models import Project

    project = Project.objects.filter(slug=slug).first()
    if project is None or membership_role(user=user, project=project) is None:
        return user, None
    return user, project.pk


class ProjectEventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user, project_id = await _resolve(self.scope)
        if user is None:
            await self.close(code=4401)
            return
        if project_id is None:
            await self.close(code=4404)
            return
        self.group = project_group(project_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def cairn_event(self, message):
        await self.send_json(message["event"])
