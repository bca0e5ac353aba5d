"""What a training job's SDK reports: checkpoints (their own endpoint, run token) and each rank's
progress (with the metric batches)."""
import pytest

from apps.tracking.services import run_for_attempt, run_token_create
from apps.training.models import Checkpoint, ReplicaProgress
from apps.training.services import replica_progress_record
from apps.workloads.choices import Kind, WorkloadStatus
from tests.factories import WorkloadFactory
from tests.tracking.conftest import batch_url
from tests.tracking.factories import run_with_token

pytestmark = pytest.mark.django_db


def _job_run(project, attempt=1):
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, status=WorkloadStatus.RUNNING, attempt=attempt)
    run = run_for_attempt(workload=workload, attempt=attempt)
    return workload, run, run_token_create(run=run)


def ck_url(run) -> str:
    return f"/api/v1/projects/{run.project.slug}/runs/{run.pk}/checkpoints/"


REPORT = {"step": 120, "size_bytes": 3_500_000, "save_seconds": 1.5, "blocking_seconds": 0.05, "replica": 0,
          "name": "step-00000120", "sha256": "ab" * 32, "two_stage": True}


def test_a_checkpoint_report_is_stored_and_shown_on_the_timeline(project, token_client):
    workload, run, token = _job_run(project, attempt=2)
    response = token_client(token).post(ck_url(run), REPORT, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["workload"] == workload.pk and response.json()["attempt"] == 2
    checkpoint = Checkpoint.objects.get(workload=workload)
    assert (checkpoint.step, checkpoint.size_bytes, checkpoint.attempt, checkpoint.two_stage) == (120, 3_500_000, 2, True)
    event = workload.events.get(reason="CheckpointSaved")
    assert "step 120" in event.message and "3.3 MiB" in event.message and "blocked 0.05s" in event.message


@pytest.mark.parametrize("change", [{"step": -1}, {"size_bytes": "big"}, {"save_seconds": -2}, {"unknown": 1},
                                    {"name": "../etc"}, {"sha256": "XYZ"}])
def test_bad_checkpoint_reports_are_400_and_store_nothing(project, token_client, change):
    workload, run, token = _job_run(project)
    response = token_client(token).post(ck_url(run), {**REPORT, **change}, format="json")
    assert response.status_code == 400 and "detail" in response.json()
    assert not Checkpoint.objects.exists()


def test_a_standalone_run_has_no_checkpoints_409(project, token_client):
    run, token = run_with_token(project=project)
    response = token_client(token).post(ck_url(run), REPORT, format="json")
    assert response.status_code == 409 and "no workload" in response.json()["detail"]


def test_another_runs_token_is_404_and_no_token_is_401(project, token_client, client):
    _, run, _ = _job_run(project)
    other, other_token = run_with_token(project=project)
    assert token_client(other_token).post(ck_url(run), REPORT, format="json").status_code == 404
    assert client.post(ck_url(run), REPORT, content_type="application/json").status_code == 401
    assert not Checkpoint.objects.exists()


def test_progress_rides_with_a_metric_batch_and_is_kept_per_rank(project, token_client):
    workload, run, token = _job_run(project)
    client = token_client(token)
    body = {"points": [{"key": "loss", "step": 10, "value": 0.5}],
            "progress": {"replica": 1, "step": 10, "steps": [[9, 0.2], [10, 0.25]]}}
    assert client.post(batch_url(run), body, format="json").status_code == 200
    assert client.post(batch_url(run), {"progress": {"replica": 0, "step": 11, "steps": [[11, 0.1]]}},
                       format="json").status_code == 200
    rows = {p.replica: p for p in ReplicaProgress.objects.filter(workload=workload)}
    assert (rows[1].step, rows[1].step_seconds, rows[1].recent) == (10, 0.25, [[9, 0.2], [10, 0.25]])
    assert (rows[0].step, rows[0].attempt) == (11, 1)


@pytest.mark.parametrize("progress", [{"replica": -1, "step": 1}, {"replica": 0, "step": 1.5},
                                      {"replica": 0, "step": 1, "steps": [[1, "slow"]]}, {"replica": 0},
                                      {"replica": 0, "step": 1, "extra": True}, [1, 2]])
def test_bad_progress_is_400(project, token_client, progress):
    workload, run, token = _job_run(project)
    response = token_client(token).post(batch_url(run), {"progress": progress}, format="json")
    assert response.status_code == 400 and "progress" in response.json()["detail"]
    assert not ReplicaProgress.objects.exists()


def test_progress_of_an_older_attempt_is_ignored_and_a_new_attempt_starts_afresh(project):
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING)
    first = replica_progress_record(workload_id=workload.pk, attempt=2, replica=0, step=50, steps=[(50, 0.3)])
    assert first.step == 50
    stale = replica_progress_record(workload_id=workload.pk, attempt=1, replica=0, step=99, steps=[(99, 9.0)])
    assert (stale.step, stale.attempt) == (50, 2)
    fresh = replica_progress_record(workload_id=workload.pk, attempt=3, replica=0, step=40, steps=[(40, 0.1)])
    assert (fresh.step, fresh.attempt, fresh.recent) == (40, 3, [[40, 0.1]])
