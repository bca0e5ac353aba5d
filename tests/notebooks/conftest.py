"""Fixtures for the notebook proxy tests: a real uvicorn server serving config.asgi (in a thread of
the test process, so it shares the test database), real JupyterLab replicas, session cookies."""
import time

import httpx
import pytest
from django.conf import settings
from django.test import Client

from apps.backends.services import workload_dispatch
from tests.backends.conftest import _kill_replicas, script  # noqa: F401 - replicas killed after each test
from tests.backends.helpers import admitted
from tests.deployments.conftest import LiveServer


@pytest.fixture
def server(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    live = LiveServer()
    yield live
    live.stop()


def session_cookie(user) -> dict:
    client = Client()
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def running_notebook(*, created_by, project, pool, spec=None, **fields):
    workload = admitted(kind="notebook", spec=spec or {"env": {}}, cpu_milli=1000, project=project, pool=pool,
                        created_by=created_by, **fields)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == "running", (workload.status, workload.status_message)
    return workload


def wait_until_serving(server, workload, cookies, *, timeout: float = 90.0) -> None:
    """Until JupyterLab answers through the proxy (it takes a few seconds to start)."""
    url = f"{server.url}/nb/{workload.project.slug}/{workload.pk}/api/status"
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = httpx.get(url, cookies=cookies, timeout=10)
        if last.status_code == 200:
            return
        time.sleep(0.3)
    raise AssertionError(f"the notebook did not answer through the proxy: {last.status_code} {last.text[:300]}")
