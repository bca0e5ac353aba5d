"""A job spec cannot ask for privileged mode, host paths, host namespaces or another namespace:
the API answers 400 with a clear detail, and nothing is stored."""
import pytest

from apps.workloads.models import Workload

P = "/api/v1/projects/vision"


@pytest.mark.parametrize(("route", "body", "field", "words"), [
    ("training-jobs", {"command": "id", "privileged": True}, "privileged", "Privileged mode"),
    ("training-jobs", {"command": "id", "security_context": {"privileged": True}}, "security_context",
     "Privileged mode"),
    ("training-jobs", {"command": "id", "securityContext": {"runAsUser": 0}}, "securityContext", "non-root"),
    ("training-jobs", {"command": "id", "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "volumes",
     "Host paths"),
    ("training-jobs", {"command": "id", "host_path": "/var/run/docker.sock"}, "host_path", "Host paths"),
    ("training-jobs", {"command": "id", "hostNetwork": True}, "hostNetwork", "Host network"),
    ("training-jobs", {"command": "id", "namespace": "kube-system"}, "namespace", "project's namespace"),
    ("notebooks", {"namespace": "default"}, "namespace", "project's namespace"),
    ("deployments", {"command": "serve", "privileged": True}, "privileged", "Privileged mode"),
])
def test_escaping_specs_are_refused_with_400_and_a_clear_detail(route, body, field, words, alice, quota,
                                                                 client_for):
    response = client_for(alice).post(f"{P}/{route}/", body, format="json")
    assert response.status_code == 400, response.content
    data = response.json()
    assert data["detail"].startswith(f"{field}: ")
    assert words in data["detail"]
    assert not Workload.objects.exists()


def test_env_values_mentioning_those_words_are_fine(alice, quota, client_for):
    body = {"command": "env", "env": {"NOTE": "privileged hostPath namespace"}}
    response = client_for(alice).post(f"{P}/training-jobs/", body, format="json")
    assert response.status_code == 201, response.content
