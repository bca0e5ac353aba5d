import threading

import pytest
from django.db import connection

from apps.core.errors import ConflictError
from apps.workloads.choices import TERMINAL, TRANSITIONS, WorkloadStatus, can_transition
from apps.workloads.models import Workload
from apps.workloads.services import workload_stop, workload_transition
from tests.factories import WorkloadFactory

S = WorkloadStatus


def test_terminal_statuses_have_no_way_out_but_a_stopped_notebook_started_again():
    for status in TERMINAL - {S.STOPPED}:
        assert TRANSITIONS[status] == frozenset()
        assert not any(can_transition(status, other) for other in S.values)
    # STOPPED -> QUEUED is "Start again" (apps.notebooks.services.notebook_start, notebooks only).
    assert TRANSITIONS[S.STOPPED] == frozenset({S.QUEUED})


@pytest.mark.parametrize(("current", "new"), [
    (S.QUEUED, S.RUNNING), (S.QUEUED, S.SUCCEEDED), (S.SUCCEEDED, S.RUNNING), (S.FAILED, S.QUEUED),
    (S.STOPPED, S.RUNNING), (S.STOPPING, S.RUNNING), (S.LOST, S.RUNNING),
])
def test_illegal_transition_is_refused_and_changes_nothing(db, current, new):
    workload = WorkloadFactory(status=current)
    with pytest.raises(ConflictError):
        workload_transition(workload_id=workload.pk, to_status=new, reason="Test")
    workload.refresh_from_db()
    assert workload.status == current
    assert not workload.events.exists()


def test_transition_records_event_condition_and_timestamps(db):
    workload = WorkloadFactory(status=S.RUNNING)
    done = workload_transition(workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.FAILED,
                               reason="Exited", message="replica 0 exited with code 3", exit_code=3)
    workload.refresh_from_db()
    assert done is not None and workload.status == S.FAILED and workload.exit_code == 3
    assert workload.finished_at is not None
    finished = [c for c in workload.conditions if c["type"] == "Finished"]
    assert finished and finished[0]["reason"] == "Exited" and finished[0]["status"] == "True"
    event = workload.events.get()
    assert (event.from_status, event.to_status, event.reason) == (S.RUNNING, S.FAILED, "Exited")


def test_compare_and_set_loser_gets_none(db):
    workload = WorkloadFactory(status=S.RUNNING)
    assert workload_transition(workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.SUCCEEDED,
                               reason="Done") is not None
    assert workload_transition(workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.FAILED,
                               reason="Late") is None
    workload.refresh_from_db()
    assert workload.status == S.SUCCEEDED
    assert workload.events.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(8))
def test_stop_racing_completion_leaves_one_consistent_state(attempt):
    """A user's stop and the backend's completion race; exactly one story ends up stored."""
    workload = WorkloadFactory(status=S.RUNNING)
    barrier = threading.Barrier(2)
    outcomes = {}

    def stopper():
        barrier.wait()
        try:
            outcomes["stop"] = workload_stop(workload=Workload.objects.get(pk=workload.pk)).status
        except ConflictError as exc:
            outcomes["stop"] = f"conflict: {exc.detail}"
        finally:
            connection.close()

    def completer():
        barrier.wait()
        try:
            done = workload_transition(workload_id=workload.pk, from_statuses={S.RUNNING, S.STOPPING},
                                       to_status=S.SUCCEEDED, reason="Completed", exit_code=0)
            outcomes["complete"] = done is not None
        finally:
            connection.close()

    threads = [threading.Thread(target=stopper), threading.Thread(target=completer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    workload.refresh_from_db()
    assert workload.status in (S.SUCCEEDED, S.STOPPING)
    transitions = list(workload.events.values_list("from_status", "to_status"))
    # The trail is a chain: each event starts where the previous one ended, and ends at the status.
    current = S.RUNNING
    for from_status, to_status in transitions:
        assert from_status == current
        current = to_status
    assert current == workload.status
    # Completion may still win after the stop (STOPPING -> SUCCEEDED); a stop after completion
    # is refused with a conflict. Either way at most one terminal status is recorded.
    assert sum(1 for _, to in transitions if to in TERMINAL) <= 1
    if workload.status == S.SUCCEEDED:
        assert outcomes["complete"] is True
        assert outcomes["stop"] in (S.STOPPING, S.SUCCEEDED) or outcomes["stop"].startswith("conflict")
    else:
        assert transitions == [(S.RUNNING, S.STOPPING)]


def test_a_condition_that_turns_false_no_longer_says_what_was_true(db, project, pool):
    """The Queued condition said "Waiting for the scheduler."; once admitted it is False and its
    message says why, not the stale wait (issue 29, item 11)."""
    from apps.workloads.services import workload_submit

    workload = workload_submit(project=project, kind="training", name="job", pool=pool, spec={"command": "true"},
                               created_by=None, priority=3, preemptible=True, replicas=1, gpu_milli=0,
                               cpu_milli=1000, memory_mb=1024)
    [queued] = workload.conditions
    assert (queued["status"], queued["message"]) == ("True", "Waiting for the scheduler.")
    workload_transition(workload_id=workload.pk, to_status=S.ADMITTED, reason="Admitted", message="Placed on n1.")
    workload.refresh_from_db()
    queued = next(c for c in workload.conditions if c["type"] == "Queued")
    assert queued["status"] == "False"
    assert queued["reason"] == "Admitted" and queued["message"] == "No longer queued: admitted (Placed on n1)."
    admitted = next(c for c in workload.conditions if c["type"] == "Admitted")
    assert (admitted["status"], admitted["message"]) == ("True", "Placed on n1.")
