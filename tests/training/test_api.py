"""The self-healing API of a training job: resilience (goodput, checkpoints, ranks, stragglers) and
the project's goodput; spec fields hang_timeout_seconds and straggler_policy."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.training.models import AttemptProgress, Checkpoint
from apps.training.services import replica_progress_record
from apps.workloads.choices import EventType, Kind, WorkloadStatus
from apps.workloads.models import Workload, WorkloadEvent
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db
S = WorkloadStatus


def _event(workload, at, reason, from_status="", to_status=""):
    event = WorkloadEvent.objects.create(workload=workload, reason=reason, from_status=from_status,
                                         to_status=to_status, type=EventType.NORMAL)
    WorkloadEvent.objects.filter(pk=event.pk).update(created_at=at)


@pytest.fixture
def job(project):
    """A 2 x 4-GPU job: attempt 1 ran 0-100 s (checkpoint at 80 s), hung; attempt 2 from 100 s,
    first step at 110 s, succeeded at 200 s."""
    t0 = timezone.now() - timedelta(hours=1)
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, replicas=2, gpu_milli=4000, status=S.SUCCEEDED,
                               attempt=2, started_at=t0, spec={"command": "x", "straggler_policy": "evict"},
                               runtime={"stragglers": [1]})
    _event(workload, t0, "Started", "admitted", "running")
    _event(workload, t0 + timedelta(seconds=100), "Hung")
    _event(workload, t0 + timedelta(seconds=200), "Succeeded", "running", "succeeded")
    Checkpoint.objects.create(workload=workload, attempt=1, step=80, size_bytes=10, save_seconds=1,
                              blocking_seconds=1)
    Checkpoint.objects.filter(workload=workload).update(created_at=t0 + timedelta(seconds=80))
    AttemptProgress.objects.create(workload=workload, attempt=1, first_step=0, first_step_at=t0 + timedelta(seconds=5))
    AttemptProgress.objects.create(workload=workload, attempt=2, first_step=81,
                                   first_step_at=t0 + timedelta(seconds=110))
    replica_progress_record(workload_id=workload.pk, attempt=2, replica=0, step=150, steps=[(150, 0.5)])
    return workload


def test_resilience_shows_goodput_checkpoints_ranks_and_stragglers(client_for, alice, job):
    response = client_for(alice).get(f"/api/v1/projects/{job.project.slug}/training-jobs/{job.pk}/resilience/")
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["goodput"]["wall_seconds"] == pytest.approx(200)
    assert data["goodput"]["lost_seconds"] == pytest.approx(20)  # 80 s -> 100 s, redone
    assert data["goodput"]["overhead_seconds"] == pytest.approx(10)  # 100 s -> first step at 110 s
    assert data["goodput"]["goodput"] == pytest.approx(170 / 200)
    assert data["goodput"]["gpu_hours_lost"] == pytest.approx(30 * 8 / 3600)
    assert [c["step"] for c in data["checkpoints"]] == [80]
    assert [(r["replica"], r["step"]) for r in data["ranks"]] == [(0, 150)]
    assert data["stragglers"] == [1] and data["straggler_policy"] == "evict" and data["hang_timeout_seconds"] == 600


def test_project_goodput_sums_the_jobs(client_for, vera, job):
    response = client_for(vera).get(f"/api/v1/projects/{job.project.slug}/training-jobs/goodput/")
    assert response.status_code == 200
    data = response.json()
    assert data["jobs"] == 1 and data["gpu_hours_lost"] == pytest.approx(30 * 8 / 3600)
    assert data["goodput"] == pytest.approx(0.85)


def test_outsiders_get_404(client_for, charlie, job):
    client = client_for(charlie)
    assert client.get(f"/api/v1/projects/{job.project.slug}/training-jobs/{job.pk}/resilience/").status_code == 404
    assert client.get(f"/api/v1/projects/{job.project.slug}/training-jobs/goodput/").status_code == 404


@pytest.mark.parametrize("fields, error", [({"hang_timeout_seconds": 0}, "hang_timeout_seconds"),
                                           ({"straggler_policy": "kill"}, "straggler_policy")])
def test_bad_self_healing_fields_are_400(client_for, alice, project, quota, fields, error):
    response = client_for(alice).post(f"/api/v1/projects/{project.slug}/training-jobs/",
                                      {"command": "echo", **fields}, format="json")
    assert response.status_code == 400 and error in response.json()["detail"]


def test_self_healing_fields_land_in_the_spec(client_for, alice, project, quota):
    response = client_for(alice).post(f"/api/v1/projects/{project.slug}/training-jobs/",
                                      {"command": "echo", "hang_timeout_seconds": 30, "straggler_policy": "evict"},
                                      format="json")
    assert response.status_code == 201, response.json()
    spec = Workload.objects.get(pk=response.json()["id"]).spec
    assert (spec["hang_timeout_seconds"], spec["straggler_policy"]) == (30, "evict")
