"""Who is on a websocket, may they still see the project, and closing the socket when not.
Shared by every project socket (docs/live.md, "Authentication").

Credentials, in this order:
  - an API token offered as the subprotocol `cairn.token.<token>` (browsers: `new WebSocket(url,
    ["cairn.v1", "cairn.token." + token])`; the server answers with `cairn.v1` only), or in an
    `Authorization: Bearer <token>` header (non-browser clients);
  - else the session cookie, which counts only when the socket's `Origin` is one of ALLOWED_HOSTS
    (OriginGate below strips the cookie of any other socket, so a foreign page cannot borrow a
    signed-in user's session).
A token in the URL (`?token=`) is refused: URLs end up in access logs.

Every socket is accepted first and then closed with a code and a reason when refused, so that
clients (browsers too) see the code: 4401 not signed in / token revoked or expired / user
deactivated / session ended, 4403 origin not allowed for a session or no longer a member, 4404 no
such project (or not a member, at connect). After the handshake, access is checked again on every
client message (one query) and every RECHECK_SECONDS (a few queries for all the sockets of the
process together), so revoking a token, deactivating a user, signing out or removing a member
closes their open sockets within about a second."""
from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass
from importlib import import_module
from urllib.parse import parse_qs, urlparse

from channels.db import database_sync_to_async
from channels.security.websocket import OriginValidator
from django.conf import settings

from apps.accounts.models import ApiToken
from apps.accounts.selectors import api_token_find
from apps.projects.models import Membership, Project

logger = logging.getLogger(__name__)

SUBPROTOCOL = "cairn.v1"
TOKEN_SUBPROTOCOL_PREFIX = "cairn.token."
RECHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Refusal:
    code: int
    reason: str  # sent in the close frame: at most 123 bytes


NO_CREDENTIALS = Refusal(4401, "Not signed in: send the session cookie or the subprotocol cairn.token.<token>.")
TOKEN_IN_URL = Refusal(4401, "API tokens are refused in the URL (it is logged); send the subprotocol "
                             "cairn.token.<token>.")
BAD_TOKEN = Refusal(4401, "Invalid API token.")
TOKEN_REVOKED = Refusal(4401, "This API token has been revoked.")
TOKEN_EXPIRED = Refusal(4401, "This API token has expired.")
TOKEN_ENDED = Refusal(4401, "This API token was revoked or has expired.")
USER_INACTIVE = Refusal(4401, "User inactive.")
SESSION_ENDED = Refusal(4401, "Your session has ended (signed out, expired or password changed).")
ORIGIN_REFUSED = Refusal(4403, "Origin not allowed for a session sign-in; non-browser clients send an API token.")
NO_PROJECT = Refusal(4404, "Project not found.")
NOT_FOUND = Refusal(4404, "Not found in this project.")
PROJECT_GONE = Refusal(4404, "This project no longer exists.")
NOT_MEMBER = Refusal(4403, "You are no longer a member of this project.")
SERVER_ERROR = Refusal(1011, "Could not check your access; reconnect.")


@dataclass(frozen=True)
class Credentials:
    """What signed a socket in, kept to check it again later."""

    user_id: int
    password: str  # the user's password hash at sign-in (a change ends session sockets)
    token_id: int | None = None
    session_key: str | None = None


# -- Origin: the session cookie is honoured only from the site's own pages ----------------------

class OriginGate:
    """ASGI middleware in front of AuthMiddlewareStack. A socket whose `Origin` is missing or not
    one of ALLOWED_HOSTS passes on, but without its cookies (so it can only sign in with an API
    token); `scope["cairn.origin_refused"]` then says whether a cookie was dropped."""

    def __init__(self, application):
        self.application = application
        allowed = settings.ALLOWED_HOSTS
        if settings.DEBUG and not allowed:
            allowed = ["localhost", "127.0.0.1", "[::1]"]
        self.validator = OriginValidator(None, allowed)

    async def __call__(self, scope, receive, send):
        origin = None
        for name, value in scope.get("headers", []):
            if name == b"origin":
                try:
                    origin = urlparse(value.decode("latin-1"))
                except (UnicodeDecodeError, ValueError):
                    origin = None
        if not self.validator.valid_origin(origin):
            headers = list(scope.get("headers", []))
            kept = [(n, v) for n, v in headers if n != b"cookie"]
            scope = {**scope, "headers": kept, "cairn.origin_refused": len(kept) != len(headers)}
        return await self.application(scope, receive, send)


# -- signing in ----------------------------------------------------------------------------------

def offered_token(scope) -> str | None:
    """The API token offered in the subprotocols or an Authorization header (never the URL)."""
    for protocol in scope.get("subprotocols") or []:
        if protocol.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return protocol[len(TOKEN_SUBPROTOCOL_PREFIX):]
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credential = value.decode("latin-1").strip().partition(" ")
            if scheme in ("Bearer", "Token"):
                return credential.strip()
    return None


def token_in_url(scope) -> bool:
    query = scope.get("query_string", b"").decode("latin-1")
    return "token" in parse_qs(query, keep_blank_values=True)


def authenticate(scope) -> tuple[Credentials | None, object, Refusal | None]:
    """(credentials, user, None) for a signed-in socket, else (None, None, refusal)."""

    if token_in_url(scope):
        return None, None, TOKEN_IN_URL
    token = offered_token(scope)
    if token is not None:
        api_token = api_token_find(token)
        if api_token is None:
            return None, None, BAD_TOKEN
        if api_token.revoked_at is not None:
            return None, None, TOKEN_REVOKED
        if not api_token.is_active:
            return None, None, TOKEN_EXPIRED
        if not api_token.user.is_active:
            return None, None, USER_INACTIVE
        user = api_token.user
        return Credentials(user_id=user.pk, password=user.password, token_id=api_token.pk), user, None
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None, None, ORIGIN_REFUSED if scope.get("cairn.origin_refused") else NO_CREDENTIALS
    if not user.is_active:
        return None, None, USER_INACTIVE
    session_key = scope["session"].session_key
    return Credentials(user_id=user.pk, password=user.password, session_key=session_key), user, None


def project_id_of(slug: str) -> int | None:

    return Project.objects.filter(slug=slug).values_list("pk", flat=True).first()


# -- checking again ------------------------------------------------------------------------------

def _session_store(session_key: str):
    return import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)


def _session_model():
    """The sessions' model when sessions live in the database (then one query checks everything)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    return store.get_model_class() if hasattr(store, "get_model_class") else None


def _session_alive(credentials: Credentials) -> bool:
    """Sessions outside the database: load it (one more lookup)."""
    from django.contrib.auth import SESSION_KEY

    return _session_store(credentials.session_key).load().get(SESSION_KEY) == str(credentials.user_id)


def _decide(credentials: Credentials, user: dict | None, credential_ok: bool, project_exists: bool,
            is_member: bool) -> Refusal | None:
    if user is None or not user["is_active"]:
        return USER_INACTIVE
    if credentials.token_id is not None:
        if not credential_ok:
            return TOKEN_ENDED
    # A password change ends every session of the user, as Django does (it checks a hash of the
    # password; the session that made the change is given a new key anyway).
    elif not credential_ok or user["password"] != credentials.password:
        return SESSION_ENDED
    if not project_exists:
        return PROJECT_GONE
    if not (user["is_staff"] or is_member):
        return NOT_MEMBER
    return None


def access_refusal(credentials: Credentials, project_id: int) -> Refusal | None:
    """None while the socket may stay: the token is live (or the session not ended), the user
    active and still a member (or staff) of a project that exists. One query (on every message)."""
    from django.contrib.auth import get_user_model
    from django.db.models import Exists, OuterRef, Q
    from django.utils import timezone


    now = timezone.now()
    checks = {
        "project_exists": Exists(Project.objects.filter(pk=project_id)),
        "is_member": Exists(Membership.objects.filter(project_id=project_id, user_id=OuterRef("pk"))),
    }
    session_model = None
    if credentials.token_id is not None:
        checks["credential_ok"] = Exists(ApiToken.objects.filter(pk=credentials.token_id, revoked_at=None).filter(
            Q(expires_at=None) | Q(expires_at__gt=now)))
    elif (session_model := _session_model()) is not None:
        checks["credential_ok"] = Exists(session_model.objects.filter(
            session_key=credentials.session_key, expire_date__gt=now))
    row = (get_user_model().objects.filter(pk=credentials.user_id).annotate(**checks)
           .values("is_active", "is_staff", "password", *checks).first())
    if row is None:
        return USER_INACTIVE
    credential_ok = row.get("credential_ok") if "credential_ok" in checks else _session_alive(credentials)
    return _decide(credentials, row, credential_ok, row["project_exists"], row["is_member"])


def access_refusals(sockets: list[tuple[Credentials, int]]) -> list[Refusal | None]:
    """access_refusal for many sockets at once, as the periodic check does for all the sockets of
    a server process: a few queries per pass (users, tokens, sessions, projects, memberships),
    however many sockets are open."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q
    from django.utils import timezone


    if not sockets:
        return []
    now = timezone.now()
    user_ids = {c.user_id for c, _ in sockets}
    project_ids = {p for _, p in sockets}
    token_ids = {c.token_id for c, _ in sockets if c.token_id is not None}
    session_keys = {c.session_key for c, _ in sockets if c.token_id is None}
    users = {u["pk"]: u for u in get_user_model().objects.filter(pk__in=user_ids).values(
        "pk", "is_active", "is_staff", "password")}
    live_tokens = set(ApiToken.objects.filter(pk__in=token_ids, revoked_at=None).filter(
        Q(expires_at=None) | Q(expires_at__gt=now)).values_list("pk", flat=True)) if token_ids else set()
    session_model = _session_model()
    if session_keys and session_model is not None:
        live_sessions = set(session_model.objects.filter(session_key__in=session_keys, expire_date__gt=now)
                            .values_list("session_key", flat=True))
    else:
        live_sessions = {c.session_key for c, _ in sockets if c.token_id is None and _session_alive(c)}
    projects = set(Project.objects.filter(pk__in=project_ids).values_list("pk", flat=True))
    members = set(Membership.objects.filter(user_id__in=user_ids, project_id__in=project_ids)
                  .values_list("user_id", "project_id"))
    return [
        _decide(c, users.get(c.user_id),
                c.token_id in live_tokens if c.token_id is not None else c.session_key in live_sessions,
                p in projects, (c.user_id, p) in members)
        for c, p in sockets
    ]


class _Watcher:
    """One per event loop (server process): every RECHECK_SECONDS, checks the access of all its
    open sockets together and closes those refused."""

    def __init__(self):
        self.sockets: weakref.WeakSet[ProjectSocket] = weakref.WeakSet()  # a crashed consumer is not kept
        self.task: asyncio.Task | None = None

    def add(self, socket: ProjectSocket) -> None:
        self.sockets.add(socket)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._run())

    def discard(self, socket: ProjectSocket) -> None:
        self.sockets.discard(socket)

    async def _run(self) -> None:
        while self.sockets:
            await asyncio.sleep(RECHECK_SECONDS)
            batch = [s for s in list(self.sockets) if not s._gone]
            if not batch:
                continue
            try:
                refusals = await _access_refusals([(s.credentials, s.project_id) for s in batch])
            except Exception:
                logger.exception("websocket: checking access failed")
                refusals = [SERVER_ERROR] * len(batch)
            for socket, refusal in zip(batch, refusals, strict=True):
                if refusal is not None:
                    self.sockets.discard(socket)
                    await socket.refuse(refusal)


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watcher] = weakref.WeakKeyDictionary()


def _watcher() -> _Watcher:
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None:
        watcher = _watchers[loop] = _Watcher()
    return watcher


_authenticate = database_sync_to_async(authenticate)
_project_id_of = database_sync_to_async(project_id_of)
_access_refusal = database_sync_to_async(access_refusal)
_access_refusals = database_sync_to_async(access_refusals)


class ProjectSocket:
    """Mixin for the websocket consumers of ws/projects/<project>/...: signing in (`admit`, then
    `open`), the checks on every message and every RECHECK_SECONDS, and sends that stay quiet once
    the client has gone (a disconnect is normal, not an error).

    Sets `self.user`, `self.slug`, `self.project_id` once admitted."""

    async def __call__(self, scope, receive, send):
        self._accepted = False
        self._gone = False  # closed by us, or the client went away: nothing more is sent
        self.credentials: Credentials | None = None

        async def quiet_send(message):
            if self._gone:
                return
            if not self._accepted:
                await send(message)
                return
            try:
                await send(message)
            except Exception as exc:  # the server refuses sends once the connection is closing
                self._gone = True
                logger.debug("websocket %s: send after the client left (%s)", scope.get("path"), exc)

        await super().__call__(scope, receive, quiet_send)

    async def admit(self) -> bool:
        """Check who is there: True when they may use this project's socket (then the consumer
        sets itself up and calls `open()`), else the socket is accepted and closed with the
        refusal's code, and False."""
        self.slug = self.scope["url_route"]["kwargs"]["project"]
        credentials, self.user, refusal = await _authenticate(self.scope)
        if refusal is None:
            self.project_id = await _project_id_of(self.slug)
            refusal = NO_PROJECT if self.project_id is None else await _access_refusal(credentials, self.project_id)
            if refusal is not None and refusal.code != 4401:
                refusal = NO_PROJECT  # at connect, never hint that a project exists
        if refusal is not None:
            await self.refuse(refusal)
            return False
        self.credentials = credentials
        return True

    async def _accept_once(self) -> None:
        if not self._accepted:
            subprotocols = self.scope.get("subprotocols") or []
            await self.accept(SUBPROTOCOL if SUBPROTOCOL in subprotocols else None)
            self._accepted = True

    async def open(self) -> None:
        """Complete the handshake of an admitted socket and start re-checking its access."""
        await self._accept_once()
        _watcher().add(self)

    async def still_allowed(self) -> bool:
        """Check access now; close the socket (and return False) when it is gone."""
        if self._gone or self.credentials is None:
            return False
        try:
            refusal = await _access_refusal(self.credentials, self.project_id)
        except Exception:
            logger.exception("websocket: checking access failed")
            refusal = SERVER_ERROR
        if refusal is not None:
            await self.refuse(refusal)
            return False
        return True

    async def refuse(self, refusal: Refusal) -> None:
        """Close with the refusal's code and reason (accepting first, so clients see the code)."""
        if self._gone:
            return
        await self._accept_once()
        await self.close(code=refusal.code, reason=refusal.reason)
        self._gone = True

    async def websocket_receive(self, message):
        if not await self.still_allowed():
            return
        await super().websocket_receive(message)

    async def websocket_disconnect(self, message):
        self._gone = True
        _watcher().discard(self)
        await super().websocket_disconnect(message)
