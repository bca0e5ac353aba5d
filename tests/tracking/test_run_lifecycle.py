"""A workload's tracking runs end with its attempt, even when the script never calls finish."""
import pytest

from apps.tracking.choices import RunStatus
from apps.tracking.models import Run
from apps.tracking.services import run_finish, run_for_attempt
from apps.workloads.choices import WorkloadStatus
from apps.workloads.services import workload_transition
from tests.factories import WorkloadFactory

S = WorkloadStatus
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("path", "expected"), [
    ([S.SUCCEEDED], RunStatus.FINISHED),
    ([S.FAILED], RunStatus.FAILED),
    ([S.LOST], RunStatus.FAILED),
    ([S.STOPPING, S.STOPPED], RunStatus.STOPPED),  # stopped, not "finished" (issue 29, item 8)
    ([S.STOPPING, S.QUEUED], RunStatus.FAILED),  # preempted and requeued: this attempt's run is over
])
def test_open_run_is_closed_when_the_attempt_ends(path, expected):
    workload = WorkloadFactory(status=S.RUNNING, attempt=1)
    run = run_for_attempt(workload=workload, attempt=1)
    for status in path[:-1]:
        workload_transition(workload_id=workload.pk, to_status=status, reason="Test")
        run.refresh_from_db()
        assert run.status == RunStatus.RUNNING
    workload_transition(workload_id=workload.pk, to_status=path[-1], reason="Test")
    run.refresh_from_db()
    assert run.status == expected
    assert run.finished_at is not None


def test_a_run_the_script_finished_keeps_its_own_status():
    workload = WorkloadFactory(status=S.RUNNING, attempt=1)
    run = run_finish(run=run_for_attempt(workload=workload, attempt=1), status=RunStatus.FAILED)
    finished_at = run.finished_at
    workload_transition(workload_id=workload.pk, to_status=S.SUCCEEDED, reason="Test")
    run.refresh_from_db()
    assert (run.status, run.finished_at) == (RunStatus.FAILED, finished_at)


def test_other_workloads_runs_are_untouched():
    mine, other = WorkloadFactory(status=S.RUNNING, attempt=1), WorkloadFactory(status=S.RUNNING, attempt=1)
    run_for_attempt(workload=mine, attempt=1)
    theirs = run_for_attempt(workload=other, attempt=1)
    workload_transition(workload_id=mine.pk, to_status=S.FAILED, reason="Test")
    assert Run.objects.get(pk=theirs.pk).status == RunStatus.RUNNING


def test_a_stopped_training_jobs_run_says_stopped_in_the_api(project, alice, client_for):
    workload = WorkloadFactory(project=project, status=S.RUNNING, attempt=1)
    run = run_for_attempt(workload=workload, attempt=1)
    workload_transition(workload_id=workload.pk, to_status=S.STOPPING, reason="StopRequested")
    workload_transition(workload_id=workload.pk, to_status=S.STOPPED, reason="Stopped")
    body = client_for(alice).get(f"/api/v1/projects/{project.slug}/runs/{run.pk}/").json()
    assert body["status"] == "stopped" and body["finished_at"] is not None


@pytest.mark.parametrize("kind", ["notebook", "deployment"])
def test_a_notebooks_or_deployments_run_is_listed_only_once_it_holds_data(project, alice, client_for, kind):
    """The backend makes a run for every attempt at launch (so a notebook can log); one that never
    logs is not listed, neither in the project's runs nor in the workload's (issue 29, item 8)."""
    from apps.tracking.services import run_params_set

    workload = WorkloadFactory(project=project, kind=kind, status=S.RUNNING, attempt=1)
    run = run_for_attempt(workload=workload, attempt=1)
    job = WorkloadFactory(project=project, kind="training", status=S.RUNNING, attempt=1)
    training_run = run_for_attempt(workload=job, attempt=1)  # a training run shows even while empty
    client = client_for(alice)
    url = f"/api/v1/projects/{project.slug}/runs/"
    assert [r["id"] for r in client.get(url).json()["results"]] == [training_run.pk]
    assert client.get(url, {"workload": workload.pk}).json()["results"] == []
    assert client.get(f"{url}{run.pk}/").status_code == 200  # still there for whoever has its id

    run_params_set(run=run, params={"model": "resnet"})
    assert {r["id"] for r in client.get(url).json()["results"]} == {run.pk, training_run.pk}
    assert [r["id"] for r in client.get(url, {"workload": workload.pk}).json()["results"]] == [run.pk]


def test_a_notebooks_run_that_logged_a_metric_is_listed(project, alice, client_for, token_client):
    from tests.tracking.conftest import batch_url

    workload = WorkloadFactory(project=project, kind="notebook", status=S.RUNNING, attempt=1)
    from apps.tracking.services import run_env_for_attempt

    env = run_env_for_attempt(workload=workload, attempt=1)
    run = Run.objects.get(pk=env["CAIRN_RUN_ID"])
    url = f"/api/v1/projects/{project.slug}/runs/"
    assert client_for(alice).get(url).json()["results"] == []
    posted = token_client(env["CAIRN_RUN_TOKEN"]).post(
        batch_url(run), {"points": [{"key": "loss", "step": 0, "value": 1.0}]}, format="json")
    assert posted.status_code in (200, 201, 202), posted.content
    assert [r["id"] for r in client_for(alice).get(url).json()["results"]] == [run.pk]
