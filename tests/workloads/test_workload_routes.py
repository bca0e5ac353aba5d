"""The kind-independent /workloads/{id}/ routes (what the dashboard's workload page calls): the
same detail, stop, events and logs as each kind's own collection, for every kind."""
import pytest

from apps.core.models import OutboxMessage
from apps.workloads.models import Workload
from tests.factories import ProjectFactory, WorkloadFactory
from tests.workloads.test_log_follow import _write

P = "/api/v1/projects/vision"
COLLECTION = {"training": "training-jobs", "notebook": "notebooks", "deployment": "deployments"}
KINDS = list(COLLECTION)


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


@pytest.mark.parametrize("kind", KINDS)
def test_detail_is_the_kind_routes_detail(kind, client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, kind=kind, status="running")
    generic = client.get(f"{P}/workloads/{workload.pk}/")
    own = client.get(f"{P}/{COLLECTION[kind]}/{workload.pk}/").json()
    assert generic.status_code == 200
    # the kind's route may add fields (a deployment's gateway_url); every common one is equal
    assert generic.json()["kind"] == kind and {k: own[k] for k in generic.json()} == generic.json()


@pytest.mark.parametrize("kind", KINDS)
def test_stop_goes_through_the_same_service(kind, client, project, pool):
    running = WorkloadFactory(project=project, pool=pool, kind=kind, status="running")
    response = client.post(f"{P}/workloads/{running.pk}/stop/")
    assert response.status_code == 202 and response.json()["status"] == "stopping"
    assert OutboxMessage.objects.filter(topic="workload.stop", payload={"workload_id": running.pk}).exists()
    queued = WorkloadFactory(project=project, pool=pool, kind=kind)
    assert client.post(f"{P}/workloads/{queued.pk}/stop/").json()["status"] == "stopped"
    again = client.post(f"{P}/workloads/{queued.pk}/stop/")
    assert again.status_code == 409 and "already finished" in again.json()["detail"]


def test_events_are_the_kind_routes_events(client):
    workload_id = client.post(f"{P}/notebooks/", {}, format="json").json()["id"]
    client.post(f"{P}/workloads/{workload_id}/stop/")
    generic = client.get(f"{P}/workloads/{workload_id}/events/", {"page_size": 1})
    assert generic.status_code == 200 and generic.json()["count"] == 2
    assert [e["reason"] for e in generic.json()["results"]] == ["Submitted"]
    assert client.get(f"{P}/workloads/{workload_id}/events/").json() == client.get(
        f"{P}/notebooks/{workload_id}/events/").json()


@pytest.mark.parametrize("kind", KINDS)
def test_logs_answer_like_the_kind_route(kind, client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, kind=kind, status="running", attempt=1, replicas=2)
    _write(workload.pk, 1, "one\ntwo\nthree\n", replica=1)
    for collection in ("workloads", COLLECTION[kind]):
        response = client.get(f"{P}/{collection}/{workload.pk}/logs/", {"replica": 1, "tail": 2},
                              HTTP_ACCEPT="text/plain")
        assert response.status_code == 200 and response.content == b"two\nthree\n", collection
        missing = client.get(f"{P}/{collection}/{workload.pk}/logs/", {"replica": 2})
        assert missing.status_code == 400 and "has 2" in missing.json()["detail"]
        assert client.get(f"{P}/{collection}/{workload.pk}/logs/", {"attempt": 5}).status_code == 400


def test_unknown_and_other_projects_workloads_are_404(client, pool):
    elsewhere = WorkloadFactory(project=ProjectFactory(slug="other"), pool=pool, status="running")
    for path in [f"{P}/workloads/{elsewhere.pk}/", f"{P}/workloads/{elsewhere.pk}/logs/",
                 f"{P}/workloads/{elsewhere.pk}/events/", f"{P}/workloads/999999/"]:
        response = client.get(path)
        assert response.status_code == 404 and "detail" in response.json(), path
    assert client.post(f"{P}/workloads/{elsewhere.pk}/stop/").status_code == 404
    assert Workload.objects.get(pk=elsewhere.pk).status == "running"


def test_creating_and_deleting_stay_on_the_kind_routes(client, project, pool):
    done = WorkloadFactory(project=project, pool=pool, status="succeeded")
    for response in [client.delete(f"{P}/workloads/{done.pk}/"),
                     client.post(f"{P}/workloads/", {"command": "true"}, format="json")]:
        assert response.status_code == 403 and response.json()["detail"] == "This action is not allowed."
    assert Workload.objects.filter(pk=done.pk).exists()
