"""Notebooks run JupyterLab, deployments their serving command; both reachable, both stoppable."""
import urllib.error
import urllib.request

import pytest

from apps.backends.services import workload_dispatch
from apps.backends.tasks import workload_stop_task
from apps.notebooks.access import runtime_token
from apps.workloads.choices import WorkloadStatus
from apps.workloads.services import workload_stop
from tests.backends.helpers import admitted, gone, reconcile_until, replica_processes, wait_for

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)


def _get(url: str, headers: dict | None = None) -> int | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None  # not listening yet


def _stop(workload):
    processes = replica_processes(workload)
    assert processes
    workload_stop(workload=workload)
    workload_stop_task.run(workload_id=workload.pk)
    reconcile_until(workload, S.STOPPED, timeout=20)
    assert gone(processes)


def test_notebook_runs_jupyterlab_reachable_with_its_token():
    workload = admitted(kind="notebook", spec={"env": {}}, cpu_milli=1000)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    url, token = workload.runtime["url"], runtime_token(workload)
    assert url.startswith("http://127.0.0.1:") and len(token) >= 20
    url += f"nb/{workload.project.slug}/{workload.pk}/"  # its base_url: Cairn's proxy path (tests/notebooks)

    status = wait_for(
        lambda: _get(url + "api/status", {"Authorization": f"token {token}"}) == 200 or None,
        timeout=60, interval=0.25, what="JupyterLab to answer",
    )
    assert status
    assert _get(url + "api/status") == 403  # the token is required
    reconcile_until(workload, S.RUNNING)  # still running as far as the reconciler can see
    _stop(workload)


def _get_over_socket(path: str) -> int | None:
    import os

    import httpx

    folder = os.open(os.path.dirname(path), os.O_PATH)  # a short alias: test paths pass the 107-byte limit
    try:
        uds = f"/proc/self/fd/{folder}/{os.path.basename(path)}"
        with httpx.Client(transport=httpx.HTTPTransport(uds=uds), timeout=5) as client:
            return client.get("http://replica/").status_code
    except httpx.HTTPError:
        return None  # not listening yet
    finally:
        os.close(folder)


def test_deployment_serves_and_stops():
    """Sandboxed (bubblewrap), a replica has no network of its own and is served on a unix socket
    (the gateway's way in, tests/deployments); otherwise on its TCP port."""
    from apps.backends.local import sandbox

    command = ["python", "-m", "http.server", "$(PORT)", "--bind", "127.0.0.1"]
    workload = admitted(kind="deployment", replicas=2, spec={"command": command, "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    if sandbox.isolation().level in (sandbox.BWRAP, sandbox.BWRAP_ROOT):
        sockets = [record["socket"] for record in workload.runtime["replicas"]]
        assert len(set(sockets)) == 2 and workload.runtime["endpoints"] == []
        for path in sockets:
            wait_for(lambda path=path: _get_over_socket(path) == 200, what=f"{path} to serve")
        _stop(workload)
        assert _get_over_socket(sockets[0]) is None
        return
    endpoints = workload.runtime["endpoints"]
    assert len(endpoints) == 2 and workload.runtime["url"] == endpoints[0]
    assert endpoints[0] != endpoints[1]
    for endpoint in endpoints:
        wait_for(lambda endpoint=endpoint: _get(endpoint) == 200, what=f"{endpoint} to serve")
    _stop(workload)
    assert _get(endpoints[0]) is None


def test_the_token_of_a_real_notebook_is_in_no_answer_or_log(alice, bob, vera, project, pool, quota, client_for):
    """Issue 22: a viewer started a kernel with the token the API showed every member. Opening goes
    through Cairn's proxy now (tests/notebooks/test_proxy.py); no answer carries the token."""
    workload = admitted(kind="notebook", spec={"env": {}}, cpu_milli=1000, project=project, pool=pool, created_by=alice)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    base = f"/api/v1/projects/{project.slug}/notebooks/{workload.pk}"
    token, address = runtime_token(workload), workload.runtime["url"]
    status = address + f"nb/{project.slug}/{workload.pk}/api/status"
    wait_for(lambda: _get(status, {"Authorization": f"token {token}"}) == 200 or None, timeout=60, interval=0.25,
             what="JupyterLab to answer")

    for user in (alice, bob, vera):
        client = client_for(user)
        answers = [client.get(f"{base}/"), client.get(f"/api/v1/projects/{project.slug}/workloads/"),
                   client.get(f"{base}/events/"), client.get(f"{base}/logs/")]
        for answer in answers:
            assert answer.status_code == 200
            text = answer.content.decode()
            assert token not in text, text  # Jupyter's own log masks it ("?token=...")
            if answer is not answers[-1]:  # the log names the address, which is of no use without the token
                assert address not in text, text
    creator_view = client_for(alice).get(f"{base}/").json()
    assert creator_view["endpoint"] == f"/nb/{project.slug}/{workload.pk}/lab"
    _stop(workload)
