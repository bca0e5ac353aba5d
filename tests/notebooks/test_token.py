"""Issue 44, found 4 and the low item: code in a notebook read JUPYTER_TOKEN and, from another
workload, used it to run code in that notebook past Cairn; the token sat in plain text in
workloads.runtime. Now JupyterLab only holds the token's SHA-256, which opens nothing, its
process cannot be read by its kernels, login cookies do not count, and the token is stored
encrypted with the credentials key."""
import importlib
import json

import httpx
import pytest
from websockets.sync.client import connect

from apps.clusters.crypto import SEALED_PREFIX, seal, unseal
from apps.notebooks.access import runtime_token
from apps.notebooks.commands import token_verifier
from tests.notebooks.conftest import running_notebook, session_cookie, wait_until_serving
from tests.notebooks.test_proxy import _execute, _ws_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

# What a kernel can find of its server's credentials: its environment, the server's environment
# and its runtime files (where Jupyter writes its token).
LOOK = r"""
import glob, json, os
found = {"env": dict(os.environ), "server_environ": None, "runtime_tokens": []}
try:
    with open(f"/proc/{os.getppid()}/environ", "rb") as f:
        found["server_environ"] = f.read().decode("latin-1")
except OSError as exc:
    found["server_environ_error"] = type(exc).__name__
for path in glob.glob(os.path.expanduser("~/.local/share/jupyter/runtime/*.json")):
    try:
        found["runtime_tokens"].append(json.load(open(path)).get("token"))
    except (OSError, ValueError):
        pass
print(json.dumps(found))
"""


def test_the_kernel_finds_no_token_that_opens_its_notebook(server, alice, project, pool, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool)
    cookies = session_cookie(alice)
    wait_until_serving(server, notebook, cookies)
    token = runtime_token(notebook)
    direct = notebook.runtime["url"] + f"nb/{project.slug}/{notebook.pk}/api/status"
    assert httpx.get(direct, headers={"Authorization": f"token {token}"}, timeout=10).status_code == 200  # Cairn can

    base = f"/nb/{project.slug}/{notebook.pk}/"
    kernel = httpx.post(f"{server.url}{base}api/kernels", cookies=cookies, headers={"Origin": server.url}, json={},
                        timeout=30)
    assert kernel.status_code == 201, kernel.text
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()), "Origin": server.url}
    with connect(_ws_url(server, f"{base}api/kernels/{kernel.json()['id']}/channels"), additional_headers=headers) as ws:
        found = json.loads(_execute(ws, LOOK))

    text = json.dumps(found)
    assert token not in text
    assert "JUPYTER_TOKEN" not in found["env"] and "CAIRN_NOTEBOOK_TOKEN_SHA256" not in found["env"]
    assert found["server_environ"] is None, "the server's environment is not readable by its kernels"
    # The verifier is all a kernel may find (Jupyter's runtime file): it opens nothing.
    candidates = {v for v in found["runtime_tokens"] if v} | {token_verifier(token)}
    for candidate in candidates:
        for attempt in ({"headers": {"Authorization": f"token {candidate}"}}, {"params": {"token": candidate}}):
            assert httpx.get(direct, timeout=10, **attempt).status_code == 403
        login = httpx.post(notebook.runtime["url"] + f"nb/{project.slug}/{notebook.pk}/login",
                           data={"password": candidate}, timeout=10)
        assert "set-cookie" not in login.headers or not any(
            c.startswith("username-") for c in login.headers.get_list("set-cookie"))


def test_jupyters_login_cookie_opens_nothing_without_the_token(server, alice, project, pool, quota):
    notebook = running_notebook(created_by=alice, project=project, pool=pool)
    wait_until_serving(server, notebook, session_cookie(alice))
    direct = notebook.runtime["url"] + f"nb/{project.slug}/{notebook.pk}/api/status"
    with httpx.Client(timeout=10) as client:
        assert client.get(direct, headers={"Authorization": f"token {runtime_token(notebook)}"}).status_code == 200
        assert client.get(direct).status_code == 403  # whatever cookie Jupyter set, the token is needed


def test_the_token_is_stored_encrypted(alice, project, pool, quota):
    from apps.backends.services import workload_dispatch
    from tests.backends.helpers import admitted

    notebook = admitted(kind="notebook", spec={"env": {}}, cpu_milli=1000, project=project, pool=pool,
                        created_by=alice)
    workload_dispatch(workload_id=notebook.pk)
    notebook.refresh_from_db()
    stored = notebook.runtime["token"]
    assert stored.startswith(SEALED_PREFIX)
    token = unseal(stored)
    assert len(token) >= 20 and token not in json.dumps(notebook.runtime)


def test_the_migration_seals_plain_tokens_and_back(alice, project, pool):
    from django.apps import apps as registry

    from tests.factories import WorkloadFactory

    migration = importlib.import_module("apps.notebooks.migrations.0002_seal_notebook_tokens")
    plain = WorkloadFactory(kind="notebook", project=project, pool=pool, runtime={"url": "http://x/", "token": "plain"})
    sealed = WorkloadFactory(kind="notebook", project=project, pool=pool,
                             runtime={"url": "http://x/", "token": seal("already")})
    none = WorkloadFactory(kind="notebook", project=project, pool=pool, runtime={"url": "http://x/", "token": None})
    migration.seal_tokens(registry, None)
    for row in (plain, sealed, none):
        row.refresh_from_db()
    assert plain.runtime["token"].startswith(SEALED_PREFIX) and unseal(plain.runtime["token"]) == "plain"
    assert unseal(sealed.runtime["token"]) == "already"  # sealed once only
    assert none.runtime["token"] is None
    migration.unseal_tokens(registry, None)
    plain.refresh_from_db()
    assert plain.runtime["token"] == "plain"
