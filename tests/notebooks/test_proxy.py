"""Cairn's notebook proxy against a real JupyterLab: pages, the REST API, kernel and terminal
websockets through /nb/<project>/<id>/, who may pass, and the Jupyter token nowhere in sight."""
import json
import uuid

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from apps.audit.models import AuditEvent
from apps.notebooks.access import runtime_token
from tests.notebooks.conftest import running_notebook, session_cookie, wait_until_serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def _ws_url(server, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def _cookie_header(cookies: dict) -> str:
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def _execute(ws, code: str, *, binary: bool = False) -> str:
    """Send an execute_request on a kernel's channels socket; the text it prints."""
    msg_id = uuid.uuid4().hex
    message = {"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "t", "session": "s",
                          "version": "5.3"},
               "parent_header": {}, "metadata": {}, "channel": "shell",
               "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                           "allow_stdin": False}}
    ws.send(json.dumps(message))
    out = ""
    while True:
        frame = ws.recv(timeout=60)
        assert isinstance(frame, str), "without a subprotocol Jupyter speaks JSON text frames"
        reply = json.loads(frame)
        if reply.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if reply["msg_type"] == "stream":
            out += reply["content"]["text"]
        if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            return out


def test_the_creator_uses_jupyterlab_through_the_proxy_kernel_and_terminal_included(
        server, alice, bob, vera, charlie, project, pool, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool)
    token = runtime_token(notebook)
    base = f"/nb/{project.slug}/{notebook.pk}/"
    cookies = session_cookie(alice)
    wait_until_serving(server, notebook, cookies)

    page = httpx.get(f"{server.url}{base}lab", cookies=cookies, headers={"Accept": "text/html",
                                                                          "Sec-Fetch-Mode": "navigate"}, timeout=20)
    assert page.status_code == 200 and "JupyterLab" in page.text
    assert base in page.text  # its base_url: every asset and socket URL goes through the proxy
    assert token not in page.text and "set-cookie" not in page.headers
    opened = AuditEvent.objects.get(action="notebook.open", target_id=str(notebook.pk))
    assert opened.actor_username == alice.username and opened.source_ip == "127.0.0.1"

    origin = {"Origin": server.url}
    kernel = httpx.post(f"{server.url}{base}api/kernels", cookies=cookies, headers=origin, json={}, timeout=30)
    assert kernel.status_code == 201, kernel.text
    kernel_id = kernel.json()["id"]
    headers = {"Cookie": _cookie_header(cookies), "Origin": server.url}
    with connect(_ws_url(server, f"{base}api/kernels/{kernel_id}/channels"), additional_headers=headers) as ws:
        assert _execute(ws, "print(6*7)") == "42\n"

    # The kernel protocol's subprotocol reaches Jupyter and its choice comes back; frames are binary.
    with connect(_ws_url(server, f"{base}api/kernels/{kernel_id}/channels"), additional_headers=headers,
                 subprotocols=["v1.kernel.websocket.jupyter.org"]) as ws:
        assert ws.subprotocol == "v1.kernel.websocket.jupyter.org"
        assert isinstance(ws.recv(timeout=30), bytes)

    terminal = httpx.post(f"{server.url}{base}api/terminals", cookies=cookies, headers=origin, timeout=30)
    assert terminal.status_code == 200, terminal.text
    name = terminal.json()["name"]
    with connect(_ws_url(server, f"{base}terminals/websocket/{name}"), additional_headers=headers) as ws:
        ws.send(json.dumps(["stdin", "echo $((6*7))x\r"]))
        seen = ""
        while "42x" not in seen:
            kind, *data = json.loads(ws.recv(timeout=30))
            if kind == "stdout":
                seen += data[0]

    # Nobody else gets in; the token is in none of their answers either.
    url = f"{server.url}{base}api/status"
    assert httpx.get(url, cookies=session_cookie(bob), timeout=10).status_code == 403
    refused = httpx.get(f"{server.url}{base}lab", cookies=session_cookie(bob),
                        headers={"Sec-Fetch-Mode": "navigate"}, timeout=10)
    assert refused.status_code == 403 and token not in refused.text
    assert AuditEvent.objects.filter(action="notebook.open").count() == 1  # a refused open is not one
    assert httpx.get(url, cookies=session_cookie(vera), timeout=10).status_code == 403
    assert httpx.get(url, cookies=session_cookie(charlie), timeout=10).status_code == 404
    assert httpx.get(url, timeout=10).status_code == 401
    signin = httpx.get(f"{server.url}{base}lab", headers={"Accept": "text/html"}, timeout=10)
    assert signin.status_code == 302
    assert signin.headers["location"] == f"/signin?next=%2Fnb%2F{project.slug}%2F{notebook.pk}%2Flab"


def test_websockets_without_a_session_or_from_another_origin_are_refused(server, alice, project, pool, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool)
    base = f"/nb/{project.slug}/{notebook.pk}/"
    cookies = session_cookie(alice)
    wait_until_serving(server, notebook, cookies)
    kernel = httpx.post(f"{server.url}{base}api/kernels", cookies=cookies, headers={"Origin": server.url}, json={},
                        timeout=30)
    url = _ws_url(server, f"{base}api/kernels/{kernel.json()['id']}/channels")
    refused = [
        {},  # no session
        {"Cookie": _cookie_header(cookies)},  # no Origin
        {"Cookie": _cookie_header(cookies), "Origin": "http://evil.example"},  # cross-site websocket hijacking
        {"Cookie": _cookie_header(cookies), "Origin": "null"},
        {"Cookie": "sessionid=forged", "Origin": server.url},
    ]
    for headers in refused:
        with pytest.raises(InvalidStatus) as caught:
            connect(url, additional_headers=headers)
        assert caught.value.response.status_code == 403, headers
    # An unsafe request from another site's page is refused as well (before the session is read).
    cross = httpx.post(f"{server.url}{base}api/kernels", cookies=cookies, headers={"Origin": "http://evil.example"},
                       json={}, timeout=10)
    assert cross.status_code == 403
    with connect(url, additional_headers={"Cookie": _cookie_header(cookies), "Origin": server.url}) as ws:
        assert _execute(ws, "print('ok')") == "ok\n"


def test_owners_and_maintainers_open_members_notebooks_only_when_the_project_shares_them(
        server, alice, bob, vera, project, pool, quota):
    notebook = running_notebook(created_by=bob, project=project, pool=pool)
    url = f"{server.url}/nb/{project.slug}/{notebook.pk}/api/status"
    wait_until_serving(server, notebook, session_cookie(bob))
    owner = session_cookie(alice)
    assert httpx.get(url, cookies=owner, timeout=10).status_code == 403
    project.shared_notebooks = True
    project.save(update_fields=["shared_notebooks"])
    assert httpx.get(url, cookies=owner, timeout=10).status_code == 200
    assert httpx.get(url, cookies=session_cookie(vera), timeout=10).status_code == 403


def test_api_tokens_open_notebooks_with_the_write_scope_only(server, alice, project, pool, quota):
    from apps.accounts.services import api_token_create

    notebook = running_notebook(created_by=alice, project=project, pool=pool)
    url = f"{server.url}/nb/{project.slug}/{notebook.pk}/api/status"
    wait_until_serving(server, notebook, session_cookie(alice))
    _, writer = api_token_create(user=alice, name="w", scopes=["read", "write"])
    _, reader = api_token_create(user=alice, name="r", scopes=["read"])
    assert httpx.get(url, headers={"Authorization": f"Bearer {writer}"}, timeout=10).status_code == 200
    assert httpx.get(url, headers={"Authorization": f"Bearer {reader}"}, timeout=10).status_code == 403
    assert httpx.get(url, headers={"Authorization": "Bearer cairn_nope_nope"}, timeout=10).status_code == 401


def test_a_stopped_or_unknown_notebook_answers_without_reaching_anything(server, alice, project, pool, quota):
    from tests.factories import WorkloadFactory

    stopped = WorkloadFactory(kind="notebook", status="stopped", project=project, pool=pool, created_by=alice)
    cookies = session_cookie(alice)
    answer = httpx.get(f"{server.url}/nb/{project.slug}/{stopped.pk}/lab", cookies=cookies, timeout=10)
    assert answer.status_code == 409 and "start it again" in answer.json()["detail"]
    for path in (f"/nb/{project.slug}/999999/lab", f"/nb/{project.slug}/x/lab", f"/nb/nope/{stopped.pk}/lab"):
        assert httpx.get(f"{server.url}{path}", cookies=cookies, timeout=10).status_code == 404
    forged = httpx.get(f"{server.url}/nb/{project.slug}/{stopped.pk}/lab", cookies=cookies,
                       headers={"Host": "evil.example"}, timeout=10)
    assert forged.status_code == 400  # a Host that is not Cairn's (DNS rebinding) gets nothing
    moved = httpx.get(f"{server.url}/nb/{project.slug}/{stopped.pk}", cookies=cookies, timeout=10)
    assert moved.status_code == 308 and moved.headers["location"] == f"/nb/{project.slug}/{stopped.pk}/"


def _an_address_of_this_machine() -> str:
    """A non-loopback IPv4 address of this machine (what a container has on its compose network),
    else another loopback address than 127.0.0.1."""
    import psutil

    found = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
             if a.family.name == "AF_INET" and not a.address.startswith("127.")]
    return found[0] if found else "127.0.0.2"


def test_notebooks_bind_where_they_are_told_and_the_proxy_uses_the_recorded_host(
        server, alice, project, pool, quota, settings):
    """docker-compose: the web container reaches notebooks at the worker's address on the compose
    network (CAIRN_NOTEBOOK_BIND_HOST), not at its loopback. The IDE's token is still required there."""
    host = _an_address_of_this_machine()
    settings.CAIRN = {**settings.CAIRN, "NOTEBOOK_BIND_HOST": host}
    notebook = running_notebook(created_by=alice, project=project, pool=pool)
    url = httpx.URL(notebook.runtime["url"])
    assert url.host == host, notebook.runtime["url"]  # recorded where it listens
    cookies = session_cookie(alice)
    settings.CAIRN = {**settings.CAIRN, "NOTEBOOK_BIND_HOST": "127.0.0.1"}  # the proxy reads the recorded host
    wait_until_serving(server, notebook, cookies)
    with pytest.raises(httpx.ConnectError):  # nothing on loopback: it listens on `host` only
        httpx.get(f"http://127.0.0.1:{url.port}/api/status", timeout=5)
    # Reachable there, but not without the token the proxy adds.
    base = f"/nb/{project.slug}/{notebook.pk}/"
    assert httpx.get(f"{notebook.runtime['url'].rstrip('/')}{base}api/kernels", timeout=10).status_code == 403
    kernel = httpx.post(f"{server.url}{base}api/kernels", cookies=cookies, headers={"Origin": server.url}, json={},
                        timeout=30)
    assert kernel.status_code == 201, kernel.text
    with connect(_ws_url(server, f"{base}api/kernels/{kernel.json()['id']}/channels"),
                 additional_headers={"Cookie": _cookie_header(cookies), "Origin": server.url}) as ws:
        assert _execute(ws, "print(6*7)") == "42\n"
