"""Notebook and serving credentials stay out of API answers (issue 22, item 3).

A notebook's address (Cairn's proxy, /nb/<project>/<id>/) is shown to those who may open it; its token to nobody,
anywhere in the workload's JSON: detail, lists, events, create and stop answers.
"""
import json

import pytest

from apps.workloads.choices import WorkloadStatus
from tests.factories import WorkloadFactory

TOKEN = "jupyter-secret-token-0123456789abcdef"
PORT = "45678"
RUNTIME = {"backend": "local", "attempt": 1, "alive": True, "master_port": 41234, "url": f"http://127.0.0.1:{PORT}/",
           "token": TOKEN, "replicas": [{"replica": 0, "pid": 4242, "create_time": 1.5, "port": int(PORT)}],
           "owner": {"pid": 99, "create_time": 2.5, "host": "h"}, "ignored_env": ["RANK"]}
BASE = "/api/v1/projects/vision"


@pytest.fixture
def notebook(alice, project, pool, quota):
    return WorkloadFactory(project=project, pool=pool, kind="notebook", name="nb", created_by=alice,
                           status=WorkloadStatus.RUNNING, attempt=1, runtime=dict(RUNTIME), spec={"env": {}})


@pytest.fixture
def deployment(alice, project, pool, quota):
    runtime = {**RUNTIME, "token": None, "endpoints": [f"http://127.0.0.1:{PORT}/", "http://127.0.0.1:45679/"]}
    return WorkloadFactory(project=project, pool=pool, kind="deployment", name="serve", created_by=alice,
                           status=WorkloadStatus.RUNNING, attempt=1, runtime=runtime,
                           spec={"command": ["serve"], "port": 8000, "env": {}})


def every_answer(client, workload, route):
    """The text of every API answer that carries the workload."""
    answers = [
        client.get(f"{BASE}/{route}/{workload.pk}/"),
        client.get(f"{BASE}/{route}/"),
        client.get(f"{BASE}/workloads/"),
        client.get(f"{BASE}/{route}/{workload.pk}/events/"),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.content
    return [answer.content.decode() for answer in answers]


def detail(client, workload, route):
    return client.get(f"{BASE}/{route}/{workload.pk}/").json()


@pytest.mark.parametrize("who", ["bob", "vera"])
def test_others_get_no_notebook_address_and_no_token(who, request, notebook, client_for):
    client = client_for(request.getfixturevalue(who))
    for text in every_answer(client, notebook, "notebooks"):
        assert TOKEN not in text and PORT not in text and "token" not in text
    body = detail(client, notebook, "notebooks")
    assert body["endpoint"] is None
    assert "runtime" not in body and body["ignored_env"] == ["RANK"]  # the backend's bookkeeping stays private


def test_the_owner_is_not_the_creator_either(bob, alice, project, pool, quota, client_for):
    """A project owner is not the notebook's creator: no address for them while the project does not
    share notebooks, the proxy's address once it does (owners and maintainers only)."""
    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook", created_by=bob,
                               status=WorkloadStatus.RUNNING, runtime=dict(RUNTIME), spec={"env": {}})
    assert detail(client_for(alice), notebook, "notebooks")["endpoint"] is None
    assert detail(client_for(bob), notebook, "notebooks")["endpoint"] == f"/nb/vision/{notebook.pk}/lab"
    project.shared_notebooks = True
    project.save(update_fields=["shared_notebooks"])
    assert detail(client_for(alice), notebook, "notebooks")["endpoint"] == f"/nb/vision/{notebook.pk}/lab"


def test_a_viewer_gets_no_address_even_in_a_project_that_shares_notebooks(vera, notebook, project, client_for):
    project.shared_notebooks = True
    project.save(update_fields=["shared_notebooks"])
    assert detail(client_for(vera), notebook, "notebooks")["endpoint"] is None


def test_the_creator_gets_the_proxy_address_but_never_the_token(alice, notebook, client_for):
    client = client_for(alice)
    for text in every_answer(client, notebook, "notebooks"):
        assert TOKEN not in text and PORT not in text
    assert detail(client, notebook, "notebooks")["endpoint"] == f"/nb/vision/{notebook.pk}/lab"
    stopped = client.post(f"{BASE}/notebooks/{notebook.pk}/stop/")
    assert stopped.status_code == 202 and TOKEN not in stopped.content.decode()
    assert stopped.json()["endpoint"] is None  # stopping: nothing to open any more


def test_the_old_open_link_is_gone(alice, notebook, client_for):
    assert client_for(alice).get(f"{BASE}/notebooks/{notebook.pk}/open/").status_code == 404


def test_a_vscode_notebook_opens_at_the_proxy_root(alice, notebook, client_for):
    notebook.spec = {"env": {}, "ide": "vscode"}
    notebook.save(update_fields=["spec"])
    assert detail(client_for(alice), notebook, "notebooks")["endpoint"] == f"/nb/vision/{notebook.pk}/"


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_members_get_a_deployments_address(who, request, deployment, client_for):
    body = detail(client_for(request.getfixturevalue(who)), deployment, "deployments")
    # Cairn's gateway (docs/deployments.md), whatever address the replica listens on
    assert body["endpoint"] == f"http://127.0.0.1:8000/serve/{deployment.project.slug}/{deployment.name}/"
    assert PORT not in json.dumps(body)
    assert "runtime" not in body


def test_a_viewer_gets_no_deployment_address(vera, deployment, client_for):
    for text in every_answer(client_for(vera), deployment, "deployments"):
        assert PORT not in text and "45679" not in text
    assert detail(client_for(vera), deployment, "deployments")["endpoint"] is None


def test_outsider_gets_404(charlie, notebook, client_for):
    assert client_for(charlie).get(f"{BASE}/notebooks/{notebook.pk}/").status_code == 404


def test_training_jobs_have_no_endpoint(alice, project, pool, quota, client_for):
    job = WorkloadFactory(project=project, pool=pool, created_by=alice, status=WorkloadStatus.RUNNING,
                          runtime=dict(RUNTIME))
    body = detail(client_for(alice), job, "training-jobs")
    assert body["endpoint"] is None and TOKEN not in json.dumps(body)


def test_create_answer_has_no_runtime_secrets(alice, quota, client_for):
    response = client_for(alice).post(f"{BASE}/notebooks/", {"name": "fresh"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["endpoint"] is None and "runtime" not in response.json()
