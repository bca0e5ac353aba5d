"""apps.workloads.lifecycle.decide: what a workload becomes from what its backend observed, one
table for every backend (the local and Kubernetes reconcilers both call it; see
tests/backends/kubernetes/test_lifecycle_parity.py for the two driven through the same story)."""
import pytest

from apps.workloads.lifecycle import (
    FAIL,
    FINISH_AT_DEADLINE,
    LOSE,
    REQUEUE,
    RESTART,
    STOP,
    SUCCEED,
    AllGone,
    AllSucceeded,
    AttemptFailed,
    Facts,
    decide,
    first_failure,
)
from apps.workloads.observations import EXITED, LOST, ReplicaState

EXIT3 = AttemptFailed(message="Replica 1 exited with code 3.", exit_code=3)
GONE = AttemptFailed(message="Replica 0 disappeared.", lost=True)
OOM = AttemptFailed(message="Replica 0 was killed for running out of memory.", exit_code=137, reason="OOMKilled")


@pytest.mark.parametrize(("facts", "observation", "expected"), [
    # a stopping workload whose replicas are all gone
    (Facts(attempt=1, max_restarts=0), AllGone(),
     (STOP, "stopped", "Stopped", "All replicas have exited.", None)),
    (Facts(attempt=1, max_restarts=0), AllGone(killed=True, grace_seconds=2.5),
     (STOP, "stopped", "Stopped", "Replicas were killed after the 2.5s grace period.", None)),
    (Facts(attempt=2, max_restarts=3, preempted=True), AllGone(),
     (REQUEUE, "queued", "Requeued", "Preempted: All replicas have exited. Back in the queue after attempt 2.", None)),
    (Facts(attempt=1, max_restarts=0, deadline_exceeded=True), AllGone(killed=True, grace_seconds=30),
     (FINISH_AT_DEADLINE, "failed", "", "Replicas were killed after the 30s grace period.", None)),
    (Facts(attempt=1, max_restarts=0, server_shutdown=True), AllGone(detail="Gone while Cairn shut down."),
     (STOP, "stopped", "ServerShutdown", "Stopped because Cairn (embedded) was shut down; it does not start again "
      "with Cairn: resubmit it to run it again.", None)),
    (Facts(attempt=1, max_restarts=0, preempted=True, server_shutdown=True),
     AllGone(killed=True, detail="Gone while Cairn shut down."),
     (REQUEUE, "queued", "Requeued", "Preempted: Gone while Cairn shut down. Back in the queue after attempt 1.",
      None)),
    # a running workload whose replicas all exited with 0
    (Facts(attempt=1, max_restarts=2), AllSucceeded(replicas=4),
     (SUCCEED, "succeeded", "Succeeded", "All 4 replica(s) exited with code 0.", 0)),
    # a failed attempt: restart while restarts remain and the run-time limit has not passed
    (Facts(attempt=1, max_restarts=2), EXIT3,
     (RESTART, "", "Restarting", "Replica 1 exited with code 3. Starting attempt 2 of 3.", None)),
    (Facts(attempt=3, max_restarts=2), EXIT3,
     (FAIL, "failed", "ReplicaFailed", "Replica 1 exited with code 3. No restarts left.", 3)),
    (Facts(attempt=1, max_restarts=0), EXIT3,
     (FAIL, "failed", "ReplicaFailed", "Replica 1 exited with code 3.", 3)),
    (Facts(attempt=1, max_restarts=0), OOM,
     (FAIL, "failed", "OOMKilled", "Replica 0 was killed for running out of memory.", 137)),
    (Facts(attempt=1, max_restarts=1), GONE,
     (RESTART, "", "Restarting", "Replica 0 disappeared. Starting attempt 2 of 2.", None)),
    (Facts(attempt=2, max_restarts=1), GONE,
     (LOSE, "lost", "ReplicaLost", "Replica 0 disappeared. No restarts left.", None)),
    (Facts(attempt=1, max_restarts=0), GONE,
     (LOSE, "lost", "ReplicaLost", "Replica 0 disappeared.", None)),
    # restarts count against the run-time limit
    (Facts(attempt=1, max_restarts=2, max_runtime_seconds=3600, past_deadline=True), EXIT3,
     (FAIL, "failed", "ReplicaFailed",
      "Replica 1 exited with code 3. Not restarted: its run-time limit of 1h has passed.", 3)),
    (Facts(attempt=3, max_restarts=2, max_runtime_seconds=60, past_deadline=True), EXIT3,
     (FAIL, "failed", "ReplicaFailed", "Replica 1 exited with code 3.", 3)),
])
def test_decide(facts, observation, expected):
    decision = decide(facts, observation)
    assert (decision.kind, decision.to_status, decision.reason, decision.message, decision.exit_code) == expected
    assert decision.attempt == (facts.attempt + 1 if decision.kind == RESTART else None)


def test_the_cause_of_a_gang_failure_is_the_first_exit_not_a_later_loss_or_kill():
    lost_first = ReplicaState(replica=0, phase=LOST, finished_at=1.0)
    killed_later = ReplicaState(replica=1, phase=EXITED, exit_code=143, finished_at=9.0)
    first_exit = ReplicaState(replica=2, phase=EXITED, exit_code=3, finished_at=5.0)
    assert first_failure([lost_first, killed_later, first_exit]) == first_exit
    assert first_failure([lost_first, ReplicaState(replica=3, phase=LOST)]) == lost_first
    # the same rule over a backend's own view of a replica (a Kubernetes pod, say)
    views = [("pod-b", killed_later), ("pod-c", first_exit)]
    assert first_failure(views, lambda view: view[1]) == ("pod-c", first_exit)
