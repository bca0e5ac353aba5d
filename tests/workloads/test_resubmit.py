"""Run again (issue 46, item 11): an ended workload is submitted anew as a new workload that
links to it (`resubmitted_from`), with the same spec; the old one keeps its history. Members and
above may; a viewer gets 403, an outsider 404; work that has not ended answers 409."""
import pytest

from apps.workloads.models import Workload
from tests.factories import QuotaFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_job(project, pool, alice):
    QuotaFactory(project=project, pool=pool)
    return WorkloadFactory(
        project=project, pool=pool, kind="training", name="train", status="failed", status_reason="ReplicaFailed",
        exit_code=3, attempt=2, created_by=alice, replicas=2, cpu_milli=1500, memory_mb=2048, priority=2,
        max_restarts=1, max_runtime_seconds=3600,
        spec={"command": ["/bin/sh", "-c", "python train.py"], "env": {"LR": "0.1"}, "working_dir": "runs"})


def test_a_failed_job_runs_again_as_a_new_linked_workload_with_its_spec(failed_job, bob, client_for):
    client = client_for(bob)
    answer = client.post(f"/api/v1/projects/vision/workloads/{failed_job.pk}/resubmit/", {}, format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["name"], body["kind"], body["status"], body["attempt"]) == ("train-2", "training", "queued", 0)
    assert body["created_by"] == "bob" and body["priority"] == "P2" and body["replicas"] == 2
    assert body["resources"] == {"gpu": 0.0, "cpu": 1.5, "memory_mb": 2048}
    assert (body["max_restarts"], body["max_runtime_seconds"]) == (1, 3600)
    assert body["resubmitted_from"] == failed_job.pk
    new = Workload.objects.get(pk=body["id"])
    assert new.resubmitted_from_id == failed_job.pk and new.spec == failed_job.spec
    failed_job.refresh_from_db()
    assert (failed_job.status, failed_job.exit_code, failed_job.attempt) == ("failed", 3, 2)  # its record stays
    assert failed_job.events.filter(reason="RunAgain", message__contains="'train-2'").exists()
    assert new.events.filter(reason="RunAgain", message__contains=f"'train' (#{failed_job.pk})").exists()

    # The chain goes on, and a name may be chosen (on the kind's route too).
    Workload.objects.filter(pk=new.pk).update(status="stopped")
    again = client.post(f"/api/v1/projects/vision/training-jobs/{new.pk}/resubmit/", {}, format="json")
    assert again.status_code == 201 and again.json()["name"] == "train-3"
    named = client.post(f"/api/v1/projects/vision/workloads/{failed_job.pk}/resubmit/", {"name": "train-fixed"},
                        format="json")
    assert named.status_code == 201 and named.json()["name"] == "train-fixed"
    taken = client.post(f"/api/v1/projects/vision/workloads/{failed_job.pk}/resubmit/", {"name": "train-fixed"},
                        format="json")
    assert taken.status_code == 409 and "already exists" in taken.json()["detail"]
    bad = client.post(f"/api/v1/projects/vision/workloads/{failed_job.pk}/resubmit/", {"name": "Bad_Name"},
                      format="json")
    assert bad.status_code == 400 and "lowercase" in bad.json()["detail"]


def test_only_ended_work_runs_again_and_only_for_members(failed_job, project, pool, bob, vera, charlie, client_for):
    running = WorkloadFactory(project=project, pool=pool, kind="deployment", name="serve", status="running",
                              spec={"command": ["/bin/sh", "-c", "serve"], "env": {}})
    answer = client_for(bob).post(f"/api/v1/projects/vision/workloads/{running.pk}/resubmit/", {}, format="json")
    assert answer.status_code == 409 and "once it has ended" in answer.json()["detail"]
    url = f"/api/v1/projects/vision/workloads/{failed_job.pk}/resubmit/"
    assert client_for(vera).post(url, {}, format="json").status_code == 403
    assert client_for(charlie).post(url, {}, format="json").status_code == 404
    assert Workload.objects.count() == 2


def test_a_stopped_deployment_runs_again_with_its_settings(project, pool, alice, client_for):
    QuotaFactory(project=project, pool=pool)
    spec = {"command": ["/bin/sh", "-c", "serve"], "env": {}, "port": 8080, "readiness_path": "/healthz",
            "public": True, "autoscaling": {"min_replicas": 1, "max_replicas": 3}}
    old = WorkloadFactory(project=project, pool=pool, kind="deployment", name="digits", status="stopped", spec=spec,
                          preemptible=False)
    answer = client_for(alice).post(f"/api/v1/projects/vision/deployments/{old.pk}/resubmit/", {}, format="json")
    assert answer.status_code == 201, answer.content
    assert (answer.json()["name"], answer.json()["spec"]["autoscaling"]) == ("digits-2", spec["autoscaling"])
    assert answer.json()["preemptible"] is False
