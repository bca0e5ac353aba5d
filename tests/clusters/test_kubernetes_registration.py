"""Registering a Kubernetes cluster: admins only, kubeconfig or in-cluster, credentials encrypted
at rest and never shown, and a connectivity check against an emulated API server."""
import pytest
import yaml
from django.db import connection

from apps.clusters.crypto import decrypt
from apps.clusters.models import Cluster, ClusterCredential
from apps.clusters.selectors import cluster_connection
from tests.backends.kubernetes.emulator import KubeEmulator
from tests.factories import ClusterFactory

URL = "/api/v1/clusters/register-kubernetes/"
TOKEN = "very-secret-token-42"


@pytest.fixture
def emulator():
    em = KubeEmulator(token=TOKEN)
    em.start()
    yield em
    em.stop()


@pytest.fixture
def kubeconfig(emulator) -> str:
    return yaml.safe_dump(emulator.kubeconfig())


def test_admin_registers_a_cluster_from_a_kubeconfig(admin_user, client_for, kubeconfig, emulator):
    response = client_for(admin_user).post(URL, {"name": "gpu-east", "kubeconfig": kubeconfig,
                                                 "config": {"volcano": True}}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["backend"] == "kubernetes" and body["config"] == {"volcano": True}
    assert body["credential"]["source"] == "kubeconfig"
    assert body["credential"]["server"] == emulator.url
    assert TOKEN not in response.content.decode()


def test_credentials_are_encrypted_at_rest(admin_user, client_for, kubeconfig):
    client_for(admin_user).post(URL, {"name": "gpu-east", "kubeconfig": kubeconfig}, format="json")
    credential = ClusterCredential.objects.get(cluster__name="gpu-east")
    with connection.cursor() as cursor:
        cursor.execute("SELECT encrypted_kubeconfig FROM clusters_clustercredential WHERE id = %s", [credential.pk])
        stored = cursor.fetchone()[0]
    assert TOKEN not in stored and "server" not in stored
    assert TOKEN in decrypt(stored)
    assert cluster_connection(cluster=credential.cluster)["kubeconfig"]["users"][0]["user"]["token"] == TOKEN


def test_a_changed_key_makes_credentials_unreadable_not_wrong(admin_user, client_for, kubeconfig, settings):
    client_for(admin_user).post(URL, {"name": "gpu-east", "kubeconfig": kubeconfig}, format="json")
    settings.CAIRN_ENCRYPTION_KEY = "another-key"
    response = client_for(admin_user).post(f"/api/v1/clusters/{Cluster.objects.get(name='gpu-east').pk}/check/",
                                           {}, format="json")
    assert response.status_code == 200
    assert response.json()["credential"]["check_ok"] is False
    assert "cannot be decrypted" in response.json()["credential"]["check_detail"]


def test_in_cluster_registration_stores_no_secret(admin_user, client_for):
    response = client_for(admin_user).post(URL, {"name": "home", "in_cluster": True}, format="json")
    assert response.status_code == 201
    credential = ClusterCredential.objects.get(cluster__name="home")
    assert credential.source == "in_cluster" and credential.encrypted_kubeconfig == ""


@pytest.mark.parametrize(("body", "words"), [
    ({"name": "x"}, "either a kubeconfig or in_cluster"),
    ({"name": "x", "in_cluster": True, "kubeconfig": "a: b"}, "either a kubeconfig or in_cluster"),
    ({"name": "x", "kubeconfig": "{not yaml: ["}, "not valid YAML"),
    ({"name": "x", "kubeconfig": "apiVersion: v1\n"}, "no clusters or contexts"),
    ({"name": "x", "in_cluster": True, "config": {"privileged": True}}, "Unknown cluster config key"),
    ({"name": "x", "in_cluster": True, "config": {"volcano": "yes"}}, "config.volcano must be true or false"),
    ({"name": "x", "in_cluster": True, "config": {"tolerations": "gpu"}}, "config.tolerations must be a list"),
    ({"name": "x", "in_cluster": True, "config": {"namespace_prefix": "Kube-"}}, "config.namespace_prefix"),
    ({"name": "x", "in_cluster": True, "config": {"shared_gpu_resources": {"nvidia.com/gpu": 2}}},
     "config.shared_gpu_resources"),
    ({"name": "x", "in_cluster": True, "config": {"accelerators": {"intel": {}}}}, "unknown vendor 'intel'"),
    ({"name": "Bad Name", "in_cluster": True}, "name:"),
])
def test_bad_registrations_answer_400_with_detail(admin_user, client_for, body, words):
    response = client_for(admin_user).post(URL, body, format="json")
    assert response.status_code == 400
    assert words in response.json()["detail"]
    assert not ClusterCredential.objects.exists()


def test_unknown_context_is_refused(admin_user, client_for, kubeconfig):
    response = client_for(admin_user).post(URL, {"name": "x", "kubeconfig": kubeconfig, "context": "nope"},
                                           format="json")
    assert response.status_code == 400 and "no context 'nope'" in response.json()["detail"]


def test_a_local_cluster_cannot_be_turned_into_kubernetes(admin_user, client_for):
    ClusterFactory(name="local", backend="local")
    response = client_for(admin_user).post(URL, {"name": "local", "in_cluster": True}, format="json")
    assert response.status_code == 409


def test_only_admins_register_or_check(alice, client_for, kubeconfig, db):
    assert client_for().post(URL, {"name": "x", "in_cluster": True}, format="json").status_code == 401
    response = client_for(alice).post(URL, {"name": "x", "in_cluster": True}, format="json")
    assert response.status_code == 403 and "administrators" in response.json()["detail"]
    cluster = ClusterFactory(name="k", backend="kubernetes")
    assert client_for(alice).post(f"/api/v1/clusters/{cluster.pk}/check/", {}, format="json").status_code == 403


def test_check_reaches_the_api_server_with_the_stored_credentials(admin_user, client_for, kubeconfig):
    client = client_for(admin_user)
    cluster_id = client.post(URL, {"name": "gpu-east", "kubeconfig": kubeconfig}, format="json").json()["id"]
    response = client.post(f"/api/v1/clusters/{cluster_id}/check/", {}, format="json")
    assert response.status_code == 200
    credential = response.json()["credential"]
    assert credential["check_ok"] is True
    assert "v1.37.0-emulated" in credential["check_detail"]
    assert credential["checked_at"]


def test_check_reports_a_wrong_token_and_an_unreachable_server(admin_user, client_for, emulator):
    config = emulator.kubeconfig()
    config["users"][0]["user"]["token"] = "wrong"
    client = client_for(admin_user)
    cluster_id = client.post(URL, {"name": "gpu-east", "kubeconfig": yaml.safe_dump(config)},
                             format="json").json()["id"]
    credential = client.post(f"/api/v1/clusters/{cluster_id}/check/", {}, format="json").json()["credential"]
    assert credential["check_ok"] is False and "401" in credential["check_detail"]
    emulator.stop()
    credential = client.post(f"/api/v1/clusters/{cluster_id}/check/", {"timeout": 1},
                             format="json").json()["credential"]
    assert credential["check_ok"] is False and "kept failing" in credential["check_detail"]


def test_check_of_a_local_cluster_is_a_400(admin_user, client_for):
    cluster = ClusterFactory(name="local", backend="local")
    response = client_for(admin_user).post(f"/api/v1/clusters/{cluster.pk}/check/", {}, format="json")
    assert response.status_code == 400 and "not a Kubernetes cluster" in response.json()["detail"]


def test_cluster_admin_page_shows_the_credential_summary_only(admin_user, client, kubeconfig, client_for):
    client_for(admin_user).post(URL, {"name": "gpu-east", "kubeconfig": kubeconfig}, format="json")
    client.force_login(admin_user)
    cluster = Cluster.objects.get(name="gpu-east")
    page = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/")
    assert page.status_code == 200
    assert TOKEN not in page.content.decode()
    assert client.get("/admin/clusters/cluster/").status_code == 200
