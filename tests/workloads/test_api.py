import pytest

from apps.core.models import OutboxMessage
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory

URL = "/api/v1/projects/vision/training-jobs/"


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


def test_submit_stores_queued_workload_and_outbox_row(client):
    response = client.post(URL, {
        "name": "resnet", "command": ["python", "train.py"], "replicas": 2,
        "resources": {"gpu": 0.5, "cpu": 2, "memory": "4Gi"}, "priority": "P1", "env": {"LR": "0.1"},
        "max_restarts": 2,
    }, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "queued" and body["priority"] == "P1" and body["replicas"] == 2
    assert body["resources"] == {"gpu": 0.5, "cpu": 2.0, "memory_mb": 4096}
    assert body["spec"]["command"] == ["python", "train.py"] and body["spec"]["env"] == {"LR": "0.1"}
    workload = Workload.objects.get(pk=body["id"])
    assert (workload.gpu_milli, workload.cpu_milli, workload.memory_mb) == (500, 2000, 4096)
    assert OutboxMessage.objects.filter(topic="scheduling.cycle", sent_at__isnull=True).exists()
    assert workload.events.get().reason == "Submitted"


def test_string_command_runs_through_the_shell(client):
    body = client.post(URL, {"command": "echo $HOME && ls"}, format="json").json()
    assert body["spec"]["command"] == ["/bin/sh", "-c", "echo $HOME && ls"]
    assert body["name"].startswith("training-")


def test_duplicate_name_is_409(client):
    assert client.post(URL, {"name": "a", "command": "true"}, format="json").status_code == 201
    response = client.post(URL, {"name": "a", "command": "true"}, format="json")
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]


def test_list_filters_orders_and_paginates(client, project, pool, django_assert_max_num_queries):
    for i in range(7):
        WorkloadFactory(project=project, pool=pool, name=f"w{i}", status="running" if i % 2 else "queued",
                        priority=i % 3)
    WorkloadFactory(project=project, pool=pool, kind="notebook", name="nb")
    with django_assert_max_num_queries(8):
        page = client.get(URL, {"page_size": 3, "ordering": "name"}).json()
    assert page["count"] == 7 and [w["name"] for w in page["results"]] == ["w0", "w1", "w2"]
    assert page["next"]
    running = client.get(URL, {"status": "running"}).json()
    assert {w["name"] for w in running["results"]} == {"w1", "w3", "w5"}
    by_priority = client.get(URL, {"ordering": "priority,name"}).json()["results"]
    assert [w["priority"] for w in by_priority][:3] == ["P0", "P0", "P0"]
    everything = client.get("/api/v1/projects/vision/workloads/", {"kind": "notebook"}).json()
    assert [w["name"] for w in everything["results"]] == ["nb"]


def test_list_query_count_does_not_grow_with_rows(client, project, pool, django_assert_max_num_queries):
    for i in range(30):
        WorkloadFactory(project=project, pool=pool, name=f"many-{i}")
    with django_assert_max_num_queries(8):
        assert client.get(URL, {"page_size": 100}).json()["count"] == 30


def test_stop_queued_workload_stops_at_once_and_second_stop_conflicts(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool)
    response = client.post(f"{URL}{workload.pk}/stop/")
    assert response.status_code == 202 and response.json()["status"] == "stopped"
    again = client.post(f"{URL}{workload.pk}/stop/")
    assert again.status_code == 409 and "already finished" in again.json()["detail"]


def test_stop_running_workload_goes_through_stopping(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, status="running")
    response = client.post(f"{URL}{workload.pk}/stop/")
    assert response.status_code == 202 and response.json()["status"] == "stopping"
    assert OutboxMessage.objects.filter(topic="workload.stop", payload={"workload_id": workload.pk}).exists()


def test_delete_running_is_409_and_keeps_the_row(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, status="running")
    response = client.delete(f"{URL}{workload.pk}/")
    assert response.status_code == 409
    assert Workload.objects.filter(pk=workload.pk).exists()


def test_delete_finished(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, status="failed")
    assert client.delete(f"{URL}{workload.pk}/").status_code == 204
    assert not Workload.objects.filter(pk=workload.pk).exists()


def test_other_kind_route_does_not_serve_the_workload(client, project, pool):
    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook")
    assert client.get(f"{URL}{notebook.pk}/").status_code == 404
    assert client.get(f"/api/v1/projects/vision/notebooks/{notebook.pk}/").status_code == 200


def test_events_are_listed_in_order(client):
    workload_id = client.post(URL, {"command": "true"}, format="json").json()["id"]
    client.post(f"{URL}{workload_id}/stop/")
    events = client.get(f"{URL}{workload_id}/events/").json()["results"]
    assert [e["reason"] for e in events] == ["Submitted", "StopRequested"]
    assert events[1]["from_status"] == "queued" and events[1]["to_status"] == "stopped"


def test_logs_reject_a_replica_that_does_not_exist(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, replicas=2, status="running")
    response = client.get(f"{URL}{workload.pk}/logs/", {"replica": 2})
    assert response.status_code == 400 and "has 2" in response.json()["detail"]
    response = client.get(f"{URL}{workload.pk}/logs/", {"tail": "abc"})
    assert response.status_code == 400


def test_pool_defaults_to_the_only_quota_pool_and_unknown_pool_is_400(client):
    assert client.post(URL, {"command": "true"}, format="json").json()["pool"] == "local"
    response = client.post(URL, {"command": "true", "pool": "nope"}, format="json")
    assert response.status_code == 400 and "Unknown resource pool 'nope'" in response.json()["detail"]


def test_notebook_and_deployment_defaults(client):
    notebook = client.post("/api/v1/projects/vision/notebooks/", {}, format="json")
    assert notebook.status_code == 201 and notebook.json()["preemptible"] is False
    deployment = client.post("/api/v1/projects/vision/deployments/", {"command": "serve", "replicas": 3},
                             format="json").json()
    # not Cairn's own 8000: on Kubernetes the pod listens on 8080 (in $PORT); locally $PORT is free
    assert deployment["kind"] == "deployment" and deployment["replicas"] == 3 and deployment["spec"]["port"] == 8080
    assert client.post("/api/v1/projects/vision/deployments/", {}, format="json").status_code == 400


def test_the_deployment_schema_says_which_port_to_listen_on_in_each_backend(client):
    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]["DeploymentCreateRequest"]
    port, command = schema["properties"]["port"], schema["properties"]["command"]
    assert port["default"] == 8080 and "8000" not in port["description"]
    assert "$PORT" in port["description"] and "local backend ignores it" in port["description"]
    assert "Kubernetes" in port["description"] and "$PORT" in command["description"]


def test_logs_answer_plain_text_clients(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, status="running")
    response = client.get(f"{URL}{workload.pk}/logs/", HTTP_ACCEPT="text/plain")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    missing = client.get(f"{URL}{workload.pk}/logs/", {"replica": 5}, HTTP_ACCEPT="text/plain")
    assert missing.status_code == 400 and b"this workload has 1" in missing.content
