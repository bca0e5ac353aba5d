"""`ide: vscode`: code-server behind the same proxy, served at the proxy's root (code-server writes
relative URLs), its own sign-in off. code-server itself cannot be installed on these machines (its
npm postinstall downloads ripgrep from GitHub, which is unreachable here; docs/notebooks.md), so
the proxy is shown to carry any HTTP app that listens where Cairn tells it: a stand-in executable
at CAIRN_CODE_SERVER that serves / and /healthz like code-server. Without one, the launch fails
and says how to install it."""
import os
import stat
import sys

import httpx
import pytest

from apps.backends.services import workload_dispatch
from apps.notebooks.services import notebook_cull_pass
from tests.backends.helpers import admitted, wait_for
from tests.notebooks.conftest import session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

STAND_IN = '''#!{python}
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
host, port = sys.argv[sys.argv.index("--bind-addr") + 1].rsplit(":", 1)
assert sys.argv[sys.argv.index("--auth") + 1] == "none"
class App(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            body = json.dumps({{"status": "alive", "lastHeartbeat": int(time.time() * 1000)}}).encode()
        else:
            body = ("code-server stand-in at " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
HTTPServer((host, int(port)), App).serve_forever()
'''


def test_a_vscode_notebook_is_served_at_the_proxys_root(server, alice, project, pool, quota, shared_dir, settings):
    binary = shared_dir / "code-server"
    binary.write_text(STAND_IN.format(python=os.path.realpath(sys.executable)))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IROTH)
    settings.CAIRN = {**settings.CAIRN, "CODE_SERVER": str(binary)}
    notebook = admitted(kind="notebook", spec={"env": {}, "ide": "vscode", "idle_timeout": 600}, cpu_milli=500,
                        project=project, pool=pool, created_by=alice)
    workload_dispatch(workload_id=notebook.pk)
    notebook.refresh_from_db()
    assert notebook.status == "running", notebook.status_message
    cookies = session_cookie(alice)
    url = f"{server.url}/nb/{project.slug}/{notebook.pk}/workbench?x=1"
    answer = wait_for(lambda: (r := httpx.get(url, cookies=cookies, timeout=10)).status_code == 200 and r,
                      timeout=60, interval=0.3, what="the stand-in to answer through the proxy")
    assert answer.text == "code-server stand-in at /workbench?x=1"  # the proxy's prefix removed
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
