"""Deployment keys: maintainers and owners create and revoke them, the key is shown once and
stored hashed; members and viewers list them (no secrets); outsiders get 404."""
import pytest

from apps.accounts.models import ApiToken
from apps.audit.models import AuditEvent
from apps.deployments.models import DeploymentKey
from apps.deployments.selectors import deployment_key_find
from tests.factories import MembershipFactory, UserFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def deployment(project, pool):
    return WorkloadFactory(project=project, pool=pool, kind="deployment", name="model",
                           spec={"command": ["serve"], "env": {}})


def _url(deployment, key_id=None):
    base = f"/api/v1/projects/vision/deployments/{deployment.pk}/keys/"
    return f"{base}{key_id}/" if key_id else base


def test_owner_creates_a_key_shown_once_and_stored_hashed(deployment, alice, client_for):
    response = client_for(alice).post(_url(deployment), {"name": "ci"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["key"].startswith(f"cairndk_{body['prefix']}_") and body["active"] is True
    assert body["created_by"] == "alice" and body["display"] == f"cairndk_{body['prefix']}_…"
    row = DeploymentKey.objects.get(pk=body["id"])
    secret = body["key"].split("_", 2)[2]
    assert row.secret_hash == ApiToken.hash_secret(secret) and secret not in row.secret_hash
    assert deployment_key_find(body["key"]) == row
    assert deployment_key_find(body["key"] + "x") is None
    listed = client_for(alice).get(_url(deployment)).json()
    assert [k["id"] for k in listed] == [row.pk] and "key" not in listed[0]
    assert AuditEvent.objects.filter(action="deployment_key.create", project=deployment.project).exists()


def test_a_maintainer_may_create_keys(deployment, project, client_for):
    maintainer = UserFactory(username="mia")
    MembershipFactory(project=project, user=maintainer, role="maintainer")
    assert client_for(maintainer).post(_url(deployment), {"name": "ci"}, format="json").status_code == 201


def test_member_and_viewer_list_but_cannot_create_or_revoke(deployment, alice, bob, vera, client_for):
    key_id = client_for(alice).post(_url(deployment), {"name": "ci"}, format="json").json()["id"]
    for user in (bob, vera):
        client = client_for(user)
        assert client.post(_url(deployment), {"name": "mine"}, format="json").status_code == 403
        assert client.delete(_url(deployment, key_id)).status_code == 403
        listed = client.get(_url(deployment))
        assert listed.status_code == 200 and [k["id"] for k in listed.json()] == [key_id]
    assert DeploymentKey.objects.get(pk=key_id).revoked_at is None


def test_outsider_gets_404(deployment, alice, charlie, client_for):
    key_id = client_for(alice).post(_url(deployment), {"name": "ci"}, format="json").json()["id"]
    client = client_for(charlie)
    assert client.get(_url(deployment)).status_code == 404
    assert client.post(_url(deployment), {"name": "x"}, format="json").status_code == 404
    assert client.delete(_url(deployment, key_id)).status_code == 404


def test_revoke_then_revoke_again_is_409(deployment, alice, client_for):
    client = client_for(alice)
    key_id = client.post(_url(deployment), {"name": "ci"}, format="json").json()["id"]
    assert client.delete(_url(deployment, key_id)).status_code == 204
    assert DeploymentKey.objects.get(pk=key_id).revoked_at is not None
    again = client.delete(_url(deployment, key_id))
    assert again.status_code == 409 and again.json()["detail"] == "This key is already revoked."
    assert client.get(_url(deployment)).json()[0]["active"] is False
    assert AuditEvent.objects.filter(action="deployment_key.revoke").count() == 1


def test_a_key_of_another_deployment_is_404_there(deployment, project, pool, alice, client_for):
    other = WorkloadFactory(project=project, pool=pool, kind="deployment", name="other")
    key_id = client_for(alice).post(_url(other), {"name": "ci"}, format="json").json()["id"]
    assert client_for(alice).delete(_url(deployment, key_id)).status_code == 404
    assert client_for(alice).delete(_url(deployment, 999999)).status_code == 404


def test_bad_input_gets_400_with_detail(deployment, alice, client_for):
    client = client_for(alice)
    missing = client.post(_url(deployment), {}, format="json")
    assert missing.status_code == 400 and "detail" in missing.json()
    assert client.post(_url(deployment), {"name": "x" * 101}, format="json").status_code == 400
    assert client.post(_url(deployment), {"name": "ci", "extra": 1}, format="json").status_code == 400


def test_keys_of_a_training_job_do_not_exist(project, pool, alice, client_for):
    job = WorkloadFactory(project=project, pool=pool, kind="training")
    assert client_for(alice).post(_url(job), {"name": "ci"}, format="json").status_code == 404


def test_deployment_detail_has_its_gateway_url(deployment, alice, bob, quota, client_for, settings):
    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": "https://cairn.example.org/"}
    deployment.runtime = {"replicas": [{"replica": 0, "pid": 1, "socket": "/data/workloads/1/attempt-1/sock-0/serve.sock"}]}
    deployment.save(update_fields=["runtime"])
    detail = client_for(bob).get(f"/api/v1/projects/vision/deployments/{deployment.pk}/").json()
    assert detail["gateway_url"] == "https://cairn.example.org/serve/vision/model/"
    assert "serve.sock" not in str(detail) and "runtime" not in detail  # backend-private
    listed = client_for(bob).get("/api/v1/projects/vision/deployments/").json()
    assert listed["results"][0]["gateway_url"] == "https://cairn.example.org/serve/vision/model/"
    created = client_for(alice).post("/api/v1/projects/vision/deployments/", {"name": "api", "command": "serve"},
                                     format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["gateway_url"] == "https://cairn.example.org/serve/vision/api/"
