"""The lifecycle parity scenarios every backend must tell the same way (issue 43): what a user
sees of a workload's life — its events (transitions, restarts) and how it ends — is decided once
(apps.workloads.lifecycle) and must not depend on the backend that ran it.

Each backend's parity test drives these scenarios on its own replicas (local processes,
tests/backends/test_lifecycle_parity.py; Slurm steps, tests/backends/slurm/test_lifecycle_parity.py;
Kubernetes pods, tests/backends/kubernetes/test_lifecycle_parity.py) and compares the story it
gets with the one expected here, the same for all.
"""
from apps.workloads.models import Workload

# The replicas' programs (Python), for the backends that run real commands.
SUCCEED = "print('done', flush=True)"
EXIT_3 = "import sys; sys.exit(3)"
CHECKPOINT_ON_SIGTERM = """
import signal, sys, time
def on_term(signum, frame):
    print("checkpoint saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(120)
"""
RANK_1_EXITS_3 = """
import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(0.5)
    sys.exit(3)
print("ready", flush=True)
time.sleep(120)
"""

STOP_MESSAGE = "Stop requested."
PREEMPT_MESSAGE = "Preempted by a test."

EXPECTED = {
    "success": [
        ("Succeeded", "running", "succeeded", "All 1 replica(s) exited with code 0."),
        ("succeeded", "Succeeded", "All 1 replica(s) exited with code 0.", 0, 1),
    ],
    "failure_restart": [
        ("Restarting", "", "", "Replica 0 exited with code 3. Starting attempt 2 of 2."),
        ("ReplicaFailed", "running", "failed", "Replica 0 exited with code 3. No restarts left."),
        ("failed", "ReplicaFailed", "Replica 0 exited with code 3. No restarts left.", 3, 2),
    ],
    "stop": [
        ("StopRequested", "running", "stopping", STOP_MESSAGE),
        ("Stopped", "stopping", "stopped", "All replicas have exited."),
        ("stopped", "Stopped", "All replicas have exited.", None, 1),
    ],
    "preemption": [
        ("Preempted", "running", "stopping", PREEMPT_MESSAGE),
        ("Requeued", "stopping", "queued", "Preempted: All replicas have exited. Back in the queue after attempt 1."),
        ("queued", "Requeued", "Preempted: All replicas have exited. Back in the queue after attempt 1.", None, 1),
    ],
    "gang_of_2": [
        ("ReplicaFailed", "running", "failed", "Replica 1 exited with code 3."),
        ("failed", "ReplicaFailed", "Replica 1 exited with code 3.", 3, 1),
    ],
}


def story(workload: Workload) -> list[tuple]:
    """What a user sees of the workload's life: its events (the transitions and restarts) and end."""
    workload.refresh_from_db()
    events = [(e.reason, e.from_status, e.to_status, e.message)
              for e in workload.events.order_by("pk") if e.reason not in ("Admitted", "Started", "Dispatched")]
    return [*events, (workload.status, workload.status_reason, workload.status_message, workload.exit_code,
                      workload.attempt)]
