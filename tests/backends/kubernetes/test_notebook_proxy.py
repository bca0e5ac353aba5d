"""Cairn's notebook proxy reaching a Kubernetes notebook (issue 23, item 3), tested against the
emulated API server (no real cluster is reachable here): from outside a cluster through the API
server's service proxy, signed in with the cluster's credentials, the Jupyter token in its own
header (the API server consumes Authorization), HTTP and the kernel's websocket both; in-cluster,
straight to the Service's DNS name. The "pod" behind the Service is a real JupyterLab started by
the test with the notebook's own launcher, base_url and token."""
import json
import os
import subprocess
import time
import uuid
from types import SimpleNamespace

import httpx
import pytest
from websockets.sync.client import connect

from apps.backends.kubernetes.proxy import notebook_upstream
from apps.backends.local.backend import free_port
from apps.backends.services import workload_dispatch
from apps.notebooks.access import runtime_token
from apps.notebooks.activity import observe
from apps.notebooks.commands import jupyterlab_command
from apps.projects.models import Membership
from tests.factories import UserFactory
from tests.notebooks.conftest import session_cookie

from .conftest import TOKEN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
NS = "cairn-vision"


@pytest.fixture
def live(settings):
    from tests.deployments.conftest import LiveServer

    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    server = LiveServer()
    yield server
    server.stop()


@pytest.fixture
def notebook(make_workload, k8s_project):
    alice = UserFactory(username="alice")
    Membership.objects.create(project=k8s_project, user=alice, role="owner")
    workload = make_workload(kind="notebook", spec={"env": {}}, created_by=alice)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == "running" and workload.runtime["namespace"] == NS
    return workload


@pytest.fixture
def pod(notebook, emulator, tmp_path):
    """A real JupyterLab as the notebook's pod would run it, behind the emulated Service."""
    port = free_port()
    argv = jupyterlab_command(SimpleNamespace(pk=notebook.pk, spec={}, project=SimpleNamespace(slug="vision")),
                              port=port, cwd=tmp_path, as_root=os.geteuid() == 0)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "JUPYTER_TOKEN": runtime_token(notebook)}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    emulator.service_backends[(NS, f"cairn-{notebook.pk}")] = f"127.0.0.1:{port}"
    yield port
    process.kill()
    process.wait(10)


def test_from_outside_the_cluster_the_proxy_goes_through_the_api_servers_service_proxy(
        live, notebook, pod, emulator):
    """Emulator only: the service proxy needs a pod that serves HTTP (no kubelet or container runs)."""
    cookies = session_cookie(notebook.created_by)
    base = f"/nb/vision/{notebook.pk}/"
    deadline = time.monotonic() + 90
    while (status := httpx.get(f"{live.url}{base}api/status", cookies=cookies, timeout=10)).status_code != 200:
        assert time.monotonic() < deadline, status.text
        time.sleep(0.3)
    page = httpx.get(f"{live.url}{base}lab", cookies=cookies, timeout=30)
    assert page.status_code == 200 and "JupyterLab" in page.text and runtime_token(notebook) not in page.text

    kernel = httpx.post(f"{live.url}{base}api/kernels", cookies=cookies, headers={"Origin": live.url}, json={},
                        timeout=30)
    assert kernel.status_code == 201, kernel.text
    url = live.url.replace("http://", "ws://") + f"{base}api/kernels/{kernel.json()['id']}/channels"
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    with connect(url, additional_headers={"Cookie": cookie, "Origin": live.url}) as ws:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "t", "session": "s",
                       "version": "5.3"}, "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": "print(6*7)", "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False}}))
        out = ""
        while True:
            reply = json.loads(ws.recv(timeout=60))
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if reply["msg_type"] == "stream":
                out += reply["content"]["text"]
            if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
                break
    assert out == "42\n"

    # Through the API server's service proxy, signed in as Cairn; Jupyter's token in its own header,
    # never in a URL the API server logs.
    service = f"/api/v1/namespaces/{NS}/services/http:cairn-{notebook.pk}:8888/proxy{base}"
    assert any(path == service + "api/status" for method, path in emulator.requests)
    assert all(path.startswith(base) for _, path, _ in emulator.proxied)
    upgrades = [headers for _, path, headers in emulator.proxied if path.endswith("/channels")]
    assert upgrades and all({k.lower(): v for k, v in h.items()}.get("x-cairn-upstream-token")
                            == runtime_token(notebook) for h in upgrades)
    assert not any(runtime_token(notebook) in path for _, path in emulator.requests)
    assert not any("Authorization" in headers or TOKEN in json.dumps(headers) for _, _, headers in emulator.proxied)

    # The idle culler reads the notebook the same way.
    seen = observe(notebook, gpu_utilisation=None)
    assert seen.reached and seen.kernels == 1


def test_in_the_cluster_the_proxy_goes_to_the_services_dns_name(notebook, settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "NOTEBOOK_ROUTE": "dns"}
    upstream = notebook_upstream(notebook, runtime_token(notebook))
    assert upstream.base == f"http://cairn-{notebook.pk}.{NS}.svc:8888"
    assert dict(upstream.headers) == {b"x-cairn-upstream-token": runtime_token(notebook).encode()}


def test_auto_picks_the_api_server_for_a_kubeconfig_connection(notebook, emulator):
    """Emulator only: the service proxy needs a pod that serves HTTP (no kubelet or container runs)."""
    upstream = notebook_upstream(notebook, runtime_token(notebook))
    assert upstream.base == f"{emulator.url}/api/v1/namespaces/{NS}/services/http:cairn-{notebook.pk}:8888/proxy"
    assert dict(upstream.headers)[b"authorization"] == f"Bearer {TOKEN}".encode()
