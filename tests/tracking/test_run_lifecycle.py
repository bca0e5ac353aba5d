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
    ([S.STOPPING, S.STOPPED], RunStatus.FINISHED),
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
