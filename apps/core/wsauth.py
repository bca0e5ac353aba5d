"""Who is on a websocket, and may they see a project? Shared by every consumer.

Websockets authenticate like the API: the session (Channels' AuthMiddlewareStack), else an API
token in `Authorization: Bearer ...` or `?token=`. Membership is re-read on demand so a consumer
can check it again on every subscribe."""
from urllib.parse import parse_qs

from channels.db import database_sync_to_async


def token_of(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            return value.decode("latin-1").removeprefix("Bearer ").strip()
    return (parse_qs(scope.get("query_string", b"").decode()).get("token") or [None])[0]


def user_of(scope):
    """The signed-in user of a websocket: the session's, else the API token's; None if neither."""
    from apps.accounts.selectors import user_from_token

    user = scope.get("user")
    if user is None or not user.is_authenticated:
        token = token_of(scope)
        user = user_from_token(token) if token else None
    return user if user is not None and user.is_authenticated else None


def member_project_id(user, slug: str) -> int | None:
    """The project's id if `user` is (still) a member of it, else None."""
    from apps.projects.models import Project
    from apps.projects.selectors import membership_role

    project = Project.objects.filter(slug=slug).first()
    if project is None or membership_role(user=user, project=project) is None:
        return None
    return project.pk


authenticated_user = database_sync_to_async(user_of)
member_project = database_sync_to_async(member_project_id)


async def admit(consumer) -> bool:
    """At connect: set `consumer.user`, `.slug` and `.project_id` from the scope, or close the
    socket (4401 not signed in, 4404 no such project or not a member) and return False."""
    consumer.user = await authenticated_user(consumer.scope)
    if consumer.user is None:
        await consumer.close(code=4401)
        return False
    consumer.slug = consumer.scope["url_route"]["kwargs"]["project"]
    consumer.project_id = await member_project(consumer.user, consumer.slug)
    if consumer.project_id is None:
        await consumer.close(code=4404)
        return False
    return True
