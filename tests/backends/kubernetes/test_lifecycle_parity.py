"""The lifecycle decisions exist once (apps.workloads.lifecycle): the same story told by the local
backend (real replica processes) and by the Kubernetes backend (the emulated API server) ends in
the same transitions, reasons, messages and exit code."""
import pytest

from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.workloads.models import Workload
from apps.workloads.services import workload_preempt
from tests.backends.helpers import admitted, reconcile_until

from .conftest import eventually

pytestmark = pytest.mark.django_db(transaction=True)
NS = "cairn-vision"


def story(workload: Workload) -> list[tuple]:
    """What a user sees of the workload's life: its events (the transitions and restarts) and end."""
    workload.refresh_from_db()
    events = [(e.reason, e.from_status, e.to_status, e.message)
              for e in workload.events.order_by("pk") if e.reason not in ("Admitted", "Started", "Dispatched")]
    return [*events, (workload.status, workload.status_reason, workload.status_message, workload.exit_code,
                      workload.attempt)]


def test_a_failing_attempt_restarts_then_fails_the_same_way_on_both_backends(
        script, reconciler, make_workload, kubelet):
    """Emulator only: it reads the emulator's store (kubelet.emulator)."""
    # local: every attempt of replica 0 exits with code 3; one restart allowed
    path = script("import sys; sys.exit(3)")
    local = admitted(spec={"command": ["python", path], "env": {}}, max_restarts=1)
    workload_dispatch(workload_id=local.pk)
    reconcile_until(local, "failed")

    # Kubernetes: the kubelet reports the same exits, attempt by attempt
    remote = make_workload(max_restarts=1)
    workload_dispatch(workload_id=remote.pk)
    for attempt in (1, 2):
        [pod] = kubelet.start_job_pods(NS, f"cairn-{remote.pk}-{attempt}")
        kubelet.terminated(NS, pod, exit_code=3)
        if attempt == 1:
            assert eventually(lambda: Workload.objects.get(pk=remote.pk).attempt == 2, step=reconciler.reconcile_pass)
            # attempt 2's Job: once attempt 1's pods are gone and the restart's backoff passed
            assert eventually(lambda: kubelet.emulator.get("jobs", NS, f"cairn-{remote.pk}-2") is not None,
                              step=reconciler.reconcile_pass)
    assert eventually(lambda: Workload.objects.get(pk=remote.pk).status == "failed", step=reconciler.reconcile_pass)

    expected_end = ("failed", "ReplicaFailed", "Replica 0 exited with code 3. No restarts left.", 3, 2)
    assert story(local)[-1] == expected_end
    assert story(remote) == story(local)
    assert ("Restarting", "", "", "Replica 0 exited with code 3. Starting attempt 2 of 2.") in story(local)


@pytest.mark.real_kube
def test_a_preempted_workload_goes_back_to_the_queue_the_same_way_on_both_backends(
        script, reconciler, make_workload, kubelet):
    # local: a replica that exits on SIGTERM
    path = script("import time; print('ready', flush=True); time.sleep(60)")
    local = admitted(spec={"command": ["python", path], "env": {}})
    workload_dispatch(workload_id=local.pk)
    # Kubernetes: a running pod, deleted with its Job on SIGTERM
    remote = make_workload()
    workload_dispatch(workload_id=remote.pk)
    [pod] = kubelet.start_job_pods(NS, f"cairn-{remote.pk}-1")
    kubelet.running(NS, pod)

    for workload in (local, remote):
        assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message="Preempted by a test.")
        workload_stop_signal(workload_id=workload.pk)
    reconcile_until(local, "queued", timeout=10)
    assert eventually(lambda: Workload.objects.get(pk=remote.pk).status == "queued", step=reconciler.reconcile_pass)

    expected_end = ("queued", "Requeued", "Preempted: All replicas have exited. Back in the queue after attempt 1.",
                    None, 1)
    assert story(local)[-1] == expected_end
    assert story(remote) == story(local)
