"""`ide: vscode`: the real code-server (`make code-server` installs it) behind the same proxy,
served at the proxy's root (code-server writes relative URLs), its own sign-in off; its port wants
the notebook's token, which only the proxy sends; its websocket (VS Code's remote connection)
opens through the proxy with the same rules as JupyterLab's, and the
culler reads its heartbeat. tests/e2e/test_dashboard_vscode.py works in it in a browser. Without
code-server, the launch fails and says how to install it."""
import uuid

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from apps.backends.services import workload_dispatch
from apps.notebooks.services import notebook_cull_pass
from tests.backends.helpers import admitted, wait_for
from tests.notebooks.code_server import require_code_server
from tests.notebooks.conftest import session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_a_vscode_notebook_is_served_at_the_proxys_root(server, alice, project, pool, quota):
    require_code_server()
    notebook = admitted(kind="notebook", spec={"env": {}, "ide": "vscode", "idle_timeout": 600}, cpu_milli=500,
                        project=project, pool=pool, created_by=alice)
    workload_dispatch(workload_id=notebook.pk)
    notebook.refresh_from_db()
    assert notebook.status == "running", notebook.status_message
    cookies = session_cookie(alice)
    base = f"/nb/{project.slug}/{notebook.pk}/"
    first = wait_for(lambda: (r := httpx.get(f"{server.url}{base}", cookies=cookies, timeout=10)).status_code == 302
                     and r, timeout=90, interval=0.3, what="code-server to answer through the proxy")
    location = first.headers["location"]
    assert location.startswith("./?folder="), location  # relative: the browser stays under Cairn's prefix
    page = httpx.get(f"{server.url}{base}{location[2:]}", cookies=cookies, timeout=30)
    assert page.status_code == 200 and "vscode-workbench-web-configuration" in page.text, page.text[:300]
    # Its assets, named relative to the page, come back through the proxy with the prefix removed.
    static = httpx.get(f"{server.url}{base}manifest.json", cookies=cookies, timeout=30)
    assert static.status_code == 200 and static.json()["name"] == "code-server", static.text[:300]
    # code-server's own port wants the notebook's token (in its session cookie, which only the
    # proxy sends): another process reaching the port directly gets its sign-in page, not the IDE.
    direct = notebook.runtime["url"]
    for jar in ({}, {"code-server-session": "guessed"}):
        refused = httpx.get(direct, cookies=jar, timeout=10)
        assert refused.status_code == 302 and refused.headers["location"].startswith("./login"), refused.headers

    # VS Code's remote connection: a websocket at the prefix, same rules as Jupyter's sockets.
    url = f"{server.url.replace('http', 'ws', 1)}{base}?reconnectionToken={uuid.uuid4()}&reconnection=false&skipWebSocketFrames=false"
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    for headers in ({}, {"Cookie": cookie, "Origin": "http://evil.example"}):
        with pytest.raises(InvalidStatus) as caught:
            connect(url, additional_headers=headers)
        assert caught.value.response.status_code in (401, 403), headers
    with connect(url, additional_headers={"Cookie": cookie, "Origin": server.url}) as ws:
        assert ws.response.status_code == 101  # code-server took the upgrade, through the proxy

    assert notebook_cull_pass() == []
    from apps.notebooks.models import NotebookActivity

    assert NotebookActivity.objects.get(workload=notebook).reached  # its heartbeat, read by the culler


def test_without_code_server_the_launch_fails_and_says_how_to_install_it(alice, project, pool, quota, settings,
                                                                         tmp_path, monkeypatch):
    settings.CAIRN = {**settings.CAIRN, "CODE_SERVER": str(tmp_path / "missing")}
    monkeypatch.setenv("PATH", str(tmp_path))
    notebook = admitted(kind="notebook", spec={"env": {}, "ide": "vscode"}, project=project, pool=pool,
                        created_by=alice)
    workload_dispatch(workload_id=notebook.pk)
    notebook.refresh_from_db()
    assert notebook.status == "failed" and notebook.status_reason == "LaunchFailed"
    assert "make code-server" in notebook.status_message
