"""Walks every GET operation of the API schema as every role and finds no credential of a
workload in any answer: not the Jupyter token, not a run token, not the address behind the proxy."""
import json
import re

import pytest
from rest_framework.test import APIClient

from tests.factories import MembershipFactory, UserFactory, WorkloadFactory

JUPYTER_TOKEN = "jupyter-secret-4c1d0e2b9a8f7e6d5c4b3a29"
RUN_TOKEN = "cairnrt_secretprefix_0123456789abcdefghij"
ADDRESS = "127.0.0.1:45999"


@pytest.fixture
def world(project, pool, node, quota):
    users = {"outsider": UserFactory(username="charlie"), "staff": UserFactory(username="root", is_staff=True)}
    for role, name in [("viewer", "vera"), ("member", "bob"), ("maintainer", "mia"), ("owner", "alice")]:
        users[role] = UserFactory(username=name)
        MembershipFactory(project=project, user=users[role], role=role)
    project.shared_notebooks = True  # the widest sharing: owners and maintainers get the proxy's address
    project.save(update_fields=["shared_notebooks"])
    runtime = {"backend": "local", "attempt": 1, "alive": True, "url": f"http://{ADDRESS}/", "token": JUPYTER_TOKEN,
               "replicas": [{"replica": 0, "pid": 1, "create_time": 1.0, "port": 45999,
                             "env": {"CAIRN_RUN_TOKEN": RUN_TOKEN, "JUPYTER_TOKEN": JUPYTER_TOKEN}}]}
    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook", status="running", created_by=users["member"],
                               attempt=1, runtime=runtime, spec={"env": {}})
    job = WorkloadFactory(project=project, pool=pool, kind="training", status="running", created_by=users["member"],
                          attempt=1, runtime={**runtime, "token": None})
    return {"users": users, "notebook": notebook, "job": job, "project": project, "node": node, "pool": pool}


def _paths(world) -> list[str]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    values = {"project": world["project"].slug, "username": "bob", "node": world["node"].name,
              "pool": world["pool"].name,
              # Storage routes by name (volumes, datasets, models): none exist here, so they answer 404.
              "name": "none", "number": 1}
    found = []
    for path, operations in schema["paths"].items():
        if "get" not in operations:
            continue
        if "{id}" in path:
            ids = [world["notebook"].pk, world["job"].pk] if "/projects/" in path else [world["node"].pk,
                                                                                          world["pool"].pk]
            found += [path.replace("{id}", str(i)) for i in ids]
        else:
            found.append(path)
    return [re.sub(r"{(\w+)}", lambda m: str(values[m.group(1)]), p) for p in found]


@pytest.mark.parametrize("role", ["owner", "maintainer", "member", "viewer", "outsider", "staff"])
def test_no_answer_to_any_role_carries_a_workload_credential(role, world):
    client = APIClient()
    client.force_authenticate(world["users"][role])
    paths = _paths(world)
    assert len(paths) > 40
    for path in paths:
        answer = client.get(path)
        assert answer.status_code < 500, (path, answer.status_code)
        text = answer.content.decode(errors="replace")
        for secret in (JUPYTER_TOKEN, RUN_TOKEN, ADDRESS):
            assert secret not in text, (role, path, secret)
    notebook = client.get(f"/api/v1/projects/vision/notebooks/{world['notebook'].pk}/")
    if role in ("owner", "maintainer", "member", "staff"):  # the creator, and (shared) owners and maintainers
        assert notebook.json()["endpoint"] == f"/nb/vision/{world['notebook'].pk}/lab"
    elif role == "viewer":
        assert notebook.json()["endpoint"] is None
    assert "token" not in json.dumps(notebook.json().get("spec", {}))
