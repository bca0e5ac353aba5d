"""The idle culler against real JupyterLab replicas: an idle notebook is stopped with IdleReclaimed
and its files are there after "Start again"; a kernel running `time.sleep` keeps it; GPU telemetry
over the threshold keeps it."""
import json
import time
import uuid

import httpx
import pytest
from django.utils import timezone
from websockets.sync.client import connect

from apps.backends.services import workload_dispatch
from apps.backends.tasks import workload_stop_task
from apps.notebooks.access import runtime_token
from apps.notebooks.models import NotebookActivity, NotebookReclaim
from apps.notebooks.selectors import reclaimed_gpu_hours
from apps.notebooks.services import notebook_cull_pass
from apps.scheduling.services import scheduling_cycle
from apps.telemetry.models import TelemetrySample
from tests.backends.helpers import reconcile_until, wait_for
from tests.notebooks.conftest import running_notebook

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def _jupyter(notebook):
    """A client straight to the notebook's JupyterLab (as the culler reaches it), and its root URL."""
    runtime = notebook.runtime
    root = f"{runtime['url']}nb/{notebook.project.slug}/{notebook.pk}/"
    client = httpx.Client(headers={"Authorization": f"token {runtime_token(notebook)}"}, timeout=30)
    wait_for(lambda: _answers(client, root + "api/status"), timeout=90, interval=0.3, what="JupyterLab to answer")
    return client, root


def _answers(client, url) -> bool:
    try:
        return client.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def _stop_it(notebook):
    workload_stop_task.run(workload_id=notebook.pk)
    return reconcile_until(notebook, "stopped", timeout=30)


def test_an_idle_notebook_is_reclaimed_and_its_files_survive_start_again(alice, project, pool, node, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool, spec={"env": {}, "idle_timeout": 3},
                                gpu_milli=0)
    client, root = _jupyter(notebook)
    saved = client.put(root + "api/contents/kept.txt", json={"type": "file", "format": "text", "content": "still here"})
    assert saved.status_code == 201, saved.text

    assert notebook_cull_pass() == []  # just started: not idle long enough
    seen = NotebookActivity.objects.get(workload=notebook)
    assert seen.reached and seen.deadline is not None and seen.busy_kernels == 0
    time.sleep(3.5)
    assert notebook_cull_pass() == [notebook.pk]
    notebook.refresh_from_db()
    assert (notebook.status, notebook.status_reason, notebook.stop_cause) == ("stopping", "IdleReclaimed", "idle")
    event = notebook.events.get(reason="IdleReclaimed")
    assert "Idle for" in event.message and "no busy kernel" in event.message
    _stop_it(notebook)
    assert (notebook.status, notebook.status_reason) == ("stopped", "IdleReclaimed")
    assert reclaimed_gpu_hours(project_ids=[project.pk])[project.pk]["reclaims"] == 1

    from apps.notebooks.services import notebook_start

    notebook_start(workload=notebook, user=alice)
    scheduling_cycle()
    notebook.refresh_from_db()
    assert notebook.status == "admitted", (notebook.status, notebook.pending_reason)
    workload_dispatch(workload_id=notebook.pk)
    notebook.refresh_from_db()
    assert notebook.status == "running" and notebook.attempt == 2
    assert NotebookReclaim.objects.get(workload=notebook).restarted_at is not None
    client, root = _jupyter(notebook)
    back = client.get(root + "api/contents/kept.txt")
    assert back.status_code == 200 and back.json()["content"] == "still here"


def test_a_kernel_running_a_long_cell_keeps_the_notebook(alice, project, pool, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool, spec={"env": {}, "idle_timeout": 2})
    client, root = _jupyter(notebook)
    kernel = client.post(root + "api/kernels", json={}).json()["id"]
    url = root.replace("http://", "ws://") + f"api/kernels/{kernel}/channels"
    with connect(url, additional_headers={"Authorization": f"token {runtime_token(notebook)}"}) as ws:
        ws.send(json.dumps({
            "header": {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "username": "t", "session": "s",
                       "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": "import time; time.sleep(60)", "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False}}))
        wait_for(lambda: any(k["execution_state"] == "busy" for k in client.get(root + "api/kernels").json()),
                 timeout=30, what="the kernel to be busy")
        time.sleep(4)  # well past its idle_timeout; the cell started more than 2 s ago
        assert notebook_cull_pass() == []
        seen = NotebookActivity.objects.get(workload=notebook)
        assert seen.busy_kernels == 1 and "busy" in seen.summary
    notebook.refresh_from_db()
    assert notebook.status == "running"


def test_gpu_utilisation_over_the_threshold_keeps_an_otherwise_idle_notebook(alice, project, pool, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool, spec={"env": {}, "idle_timeout": 2})
    _jupyter(notebook)
    time.sleep(2.5)
    TelemetrySample.objects.create(time=timezone.now(), node="node-a", gpu=0, workload=notebook,
                                   metric="gpu.util_percent", value=73.0)
    assert notebook_cull_pass() == []
    seen = NotebookActivity.objects.get(workload=notebook)
    assert seen.gpu_utilisation == 73.0 and "GPU utilisation 73.0%" in seen.summary
    # The GPU goes quiet (a sample under 5%): idle from the last busy moment on.
    TelemetrySample.objects.create(time=timezone.now(), node="node-a", gpu=0, workload=notebook,
                                   metric="gpu.util_percent", value=1.0)
    assert notebook_cull_pass() == []
    time.sleep(2.5)
    assert notebook_cull_pass() == [notebook.pk]
