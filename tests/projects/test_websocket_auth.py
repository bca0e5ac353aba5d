"""Who may keep a project websocket open (apps/projects/wsauth.py, docs/live.md "Authentication"):
API tokens in the subprotocol (never the URL), the session cookie only from the site's own
origin, and access checked again on every message and every second, so that revoking a token,
deactivating a user, signing out or removing a member closes sockets that are already open.
Through the real ASGI application and Redis channel layer."""
import time

import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.projects.models import Membership, Project
from config.asgi import application
from tests.factories import MembershipFactory, UserFactory, make_token
from tests.sockets import close_of, refused_with
from tests.tracking.factories import RunFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")
PATHS = ["/ws/projects/vision/live/", "/ws/projects/vision/events/", "/ws/projects/vision/runs/live/"]


def _ws(path: str = PATHS[0], *, token: str | None = None, bearer: str | None = None, cookie: str | None = None,
        origin: bytes | None = b"http://127.0.0.1", subprotocols: list[str] | None = None) -> WebsocketCommunicator:
    headers = [HOST]
    if origin is not None:
        headers.append((b"origin", origin))
    if bearer:
        headers.append((b"authorization", f"Bearer {bearer}".encode()))
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    if token:
        subprotocols = ["cairn.v1", f"cairn.token.{token}"]
    return WebsocketCommunicator(application, path, headers=headers, subprotocols=subprotocols)


async def _open(ws: WebsocketCommunicator) -> WebsocketCommunicator:
    connected, detail = await ws.connect()
    assert connected, detail
    return ws


async def _closed_within(ws: WebsocketCommunicator, seconds: float) -> dict:
    """The socket is closed by the server, without the client sending anything, within `seconds`."""
    started = time.monotonic()
    closed = await close_of(ws, timeout=seconds)
    assert time.monotonic() - started <= seconds
    return closed


def _session_client(user) -> Client:
    client = Client(enforce_csrf_checks=False)
    client.force_login(user)
    return client


# -- signing in ------------------------------------------------------------------------------------

async def test_token_in_the_subprotocol_signs_in_and_only_cairn_v1_is_answered(vera, project):
    token = await sync_to_async(make_token)(vera, scopes=["read"])
    ws = _ws(token=token)
    connected, subprotocol = await ws.connect()
    assert connected and subprotocol == "cairn.v1"
    await ws.send_json_to({"action": "subscribe", "topic": "workloads"})
    assert await ws.receive_json_from(timeout=5) == {"topic": "workloads", "type": "subscribed"}
    await ws.disconnect()


async def test_every_endpoint_takes_the_subprotocol_token(alice, project):
    token = await sync_to_async(make_token)(alice)
    run = await sync_to_async(RunFactory)(project=project)
    for path in [*PATHS, f"/ws/projects/vision/runs/{run.pk}/live/"]:
        ws = await _open(_ws(path, token=token))
        assert await ws.receive_nothing(timeout=0.1)
        await ws.disconnect()


async def test_refusals_are_close_codes_with_reasons_after_the_handshake(alice, charlie, project):
    revoked = await sync_to_async(make_token)(alice, revoked_at=timezone.now())
    expired = await sync_to_async(make_token)(alice, expires_at=timezone.now() - timezone.timedelta(seconds=1))
    outsider = await sync_to_async(make_token)(charlie)
    member = await sync_to_async(make_token)(alice)
    for path in PATHS:
        assert await refused_with(_ws(path)) == 4401
        assert await refused_with(_ws(path, token="cairn_0123456789ab_nope")) == 4401
        assert await refused_with(_ws(path, token=revoked)) == 4401
        assert await refused_with(_ws(path, token=expired)) == 4401
        assert await refused_with(_ws(path, bearer=revoked)) == 4401
        assert await refused_with(_ws(path, token=outsider)) == 4404
        assert await refused_with(_ws(path.replace("vision", "nope"), token=member)) == 4404
    ws = _ws(token=revoked)
    await ws.connect()
    assert await close_of(ws) == {"code": 4401, "reason": "This API token has been revoked."}


async def test_a_token_in_the_url_is_refused_even_a_good_one(alice, project):
    token = await sync_to_async(make_token)(alice)
    for path in PATHS:
        ws = _ws(f"{path}?token={token}")
        assert (await ws.connect())[0]
        closed = await close_of(ws)
        assert closed["code"] == 4401 and "URL" in closed["reason"] and "cairn.token.<token>" in closed["reason"]
        assert token not in closed["reason"]


async def test_session_cookie_counts_only_from_the_sites_own_origin(bob, project):
    client = await sync_to_async(_session_client)(bob)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    ws = await _open(_ws(cookie=cookie))
    await ws.send_json_to({"action": "subscribe", "topic": "workloads"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
    await ws.disconnect()
    for origin in [b"http://evil.example", None]:
        ws = _ws(cookie=cookie, origin=origin)
        assert (await ws.connect())[0]
        closed = await close_of(ws)
        assert closed["code"] == 4403 and "Origin" in closed["reason"]


async def test_token_clients_need_no_origin(bob, project):
    token = await sync_to_async(make_token)(bob)
    for ws in [_ws(token=token, origin=None), _ws(bearer=token, origin=None)]:
        await _open(ws)
        await ws.send_json_to({"action": "subscribe", "topic": "runs"})
        assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
        await ws.disconnect()
    assert await refused_with(_ws(origin=None)) == 4401  # no credentials at all


# -- already open sockets ----------------------------------------------------------------------------

async def test_revoking_a_token_closes_its_open_sockets_within_two_seconds(bob, project):
    token = await sync_to_async(make_token)(bob)
    other = await sync_to_async(make_token)(bob)
    sockets = [await _open(_ws(path, token=token)) for path in PATHS]
    untouched = await _open(_ws(token=other))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {other}")
    token_id = await sync_to_async(lambda: ApiToken.objects.get(prefix=token.split("_")[1]).pk)()
    response = await sync_to_async(api.delete)(f"/api/v1/tokens/{token_id}/")
    assert response.status_code == 204, response.content
    for ws in sockets:
        assert await _closed_within(ws, 2.5) == {"code": 4401, "reason": "This API token was revoked or has expired."}
    assert await untouched.receive_nothing(timeout=0.2)
    await untouched.send_json_to({"action": "subscribe", "topic": "workloads"})
    assert (await untouched.receive_json_from(timeout=5))["type"] == "subscribed"
    await untouched.disconnect()


async def test_a_message_after_revocation_is_not_served(bob, project, monkeypatch):
    import apps.projects.wsauth as wsauth

    monkeypatch.setattr(wsauth, "RECHECK_SECONDS", 60)  # only the per-message check can catch it
    token = await sync_to_async(make_token)(bob)
    ws = await _open(_ws(token=token))
    await sync_to_async(ApiToken.objects.filter(prefix=token.split("_")[1]).update)(revoked_at=timezone.now())
    await ws.send_json_to({"action": "subscribe", "topic": "workloads"})
    assert (await close_of(ws, timeout=1))["code"] == 4401


async def test_an_expiring_token_closes_its_socket(bob, project):
    token = await sync_to_async(make_token)(bob, expires_at=timezone.now() + timezone.timedelta(seconds=1))
    ws = await _open(_ws(token=token))
    assert (await _closed_within(ws, 3.5))["code"] == 4401


async def test_deactivating_the_user_closes_the_socket(bob, project):
    token = await sync_to_async(make_token)(bob)
    ws = await _open(_ws(token=token))
    bob.is_active = False
    await sync_to_async(bob.save)(update_fields=["is_active"])
    assert await _closed_within(ws, 2.5) == {"code": 4401, "reason": "User inactive."}


async def test_removing_a_member_closes_their_sockets_on_every_endpoint(project, alice):
    membership = await sync_to_async(MembershipFactory)(project=project, role="member")
    token = await sync_to_async(make_token)(membership.user)
    sockets = [await _open(_ws(path, token=token)) for path in PATHS]
    owner = await _open(_ws(token=await sync_to_async(make_token)(alice)))
    await sync_to_async(Membership.objects.filter(pk=membership.pk).delete)()
    for ws in sockets:
        assert await _closed_within(ws, 2.5) == {"code": 4403, "reason": "You are no longer a member of this project."}
    assert await owner.receive_nothing(timeout=0.2)
    await owner.disconnect()


async def test_staff_stay_while_not_members_and_a_deleted_project_closes_with_4404(project):
    staff = await sync_to_async(UserFactory)(username="ops", is_staff=True)
    ws = await _open(_ws(token=await sync_to_async(make_token)(staff)))
    assert await ws.receive_nothing(timeout=1.5)  # one re-check passed
    await sync_to_async(Project.objects.filter(pk=project.pk).delete)()
    assert await _closed_within(ws, 2.5) == {"code": 4404, "reason": "This project no longer exists."}


async def test_signing_out_closes_the_session_socket(bob, project):
    client = await sync_to_async(_session_client)(bob)
    ws = await _open(_ws(cookie=f"sessionid={client.cookies['sessionid'].value}"))
    response = await sync_to_async(client.delete)("/api/v1/auth/session/")
    assert response.status_code == 204
    assert (await _closed_within(ws, 2.5))["code"] == 4401


async def test_an_expired_session_closes_the_session_socket(bob, project):
    client = await sync_to_async(_session_client)(bob)
    key = client.cookies["sessionid"].value
    ws = await _open(_ws(cookie=f"sessionid={key}"))
    assert await ws.receive_nothing(timeout=1.5)
    await sync_to_async(Session.objects.filter(session_key=key).update)(
        expire_date=timezone.now() - timezone.timedelta(seconds=1))
    assert (await _closed_within(ws, 2.5))["code"] == 4401


async def test_a_password_change_closes_session_sockets(bob, project):
    client = await sync_to_async(_session_client)(bob)
    ws = await _open(_ws(cookie=f"sessionid={client.cookies['sessionid'].value}"))

    def change_password():
        bob.set_password("a new one")
        bob.save()

    await sync_to_async(change_password)()
    assert (await _closed_within(ws, 2.5))["code"] == 4401

