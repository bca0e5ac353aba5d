"""Run-time limits on Kubernetes, through the real client against the emulated API server: the
training Job carries the limit as activeDeadlineSeconds (what is left of it for a restart), and
the Job controller's DeadlineExceeded failure becomes FAILED with reason DeadlineExceeded, never
a restart."""
import copy
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.services import workload_dispatch
from apps.workloads.models import Workload, WorkloadEvent

from .test_reconciler import NS, condition, running_training, status_of, until


def _run_for(workload, seconds: float) -> None:
    """As if the current run had been admitted and started `seconds` ago."""
    started = timezone.now() - timedelta(seconds=seconds)
    Workload.objects.filter(pk=workload.pk).update(admitted_at=started - timedelta(seconds=1), started_at=started)


@pytest.mark.real_kube
def test_the_job_gets_the_whole_limit_as_its_active_deadline(emulator, make_workload):
    # Admitted again after a requeue: its previous run's start (long ago) does not count.
    now = timezone.now()
    workload = make_workload(max_runtime_seconds=7200, admitted_at=now, started_at=now - timedelta(hours=5))
    workload_dispatch(workload_id=workload.pk)
    job = emulator.get("jobs", NS, f"cairn-{workload.pk}-1")
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    unlimited = make_workload()
    workload_dispatch(workload_id=unlimited.pk)
    assert "activeDeadlineSeconds" not in emulator.get("jobs", NS, f"cairn-{unlimited.pk}-1")["spec"]


def test_a_job_failed_at_its_deadline_ends_failed_with_deadline_exceeded_and_is_not_restarted(
        reconciler, make_workload, kubelet, emulator):
    """Emulator only: the job controller's deadline conditions written by hand at a faked clock."""
    workload, pods = running_training(make_workload, kubelet, replicas=2, max_restarts=2, max_runtime_seconds=3600)
    for pod in pods:
        kubelet.running(NS, pod)
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    job = f"cairn-{workload.pk}-1"
    # The job controller terminated the pods (SIGTERM: exit code 143) and failed the Job.
    for pod in pods:
        kubelet.terminated(NS, pod, exit_code=143)
    kubelet.job_deadline_exceeded(NS, job)

    assert until(reconciler, lambda: status_of(workload).status == "failed")
    failed = status_of(workload)
    assert failed.status_reason == "DeadlineExceeded" and failed.attempt == 1
    assert failed.status_message == "Stopped after reaching its run-time limit of 1h. All replicas have exited."
    assert failed.exit_code is None
    stopping = WorkloadEvent.objects.get(workload=workload, reason="DeadlineExceeded", to_status="stopping")
    assert "Kubernetes: Job was active longer than specified deadline." in stopping.message
    assert not WorkloadEvent.objects.filter(workload=workload, reason="Restarting").exists()
    assert [j["metadata"]["name"] for j in emulator.list("jobs", NS)] == [job]  # kept, for its status


def test_pods_still_terminating_at_the_deadline_hold_the_workload_stopping_then_are_forced(
        reconciler, make_workload, kubelet, emulator):
    """Emulator only: the job controller's deadline conditions written by hand, pods outliving SIGTERM."""
    workload, pods = running_training(make_workload, kubelet, max_runtime_seconds=3600)
    kubelet.running(NS, pods[0])
    kubelet.job_deadline_exceeded(NS, f"cairn-{workload.pk}-1", terminal=False)  # FailureTarget only
    assert until(reconciler, lambda: status_of(workload).status == "stopping")
    assert status_of(workload).status_reason == "DeadlineExceeded"
    # The pod ignores SIGTERM: after Cairn's grace period (0.5s in tests) it is deleted with no grace.
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    assert status_of(workload).status_reason == "DeadlineExceeded"
    assert "killed after the 0.5s grace period" in status_of(workload).status_message
    assert emulator.list("pods", NS) == []


@pytest.mark.real_kube
def test_a_restart_gets_what_is_left_of_the_limit(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, max_restarts=1, max_runtime_seconds=3600)
    _run_for(workload, 1000)
    kubelet.terminated(NS, pods[0], exit_code=1)
    assert until(reconciler, lambda: status_of(workload).attempt == 2)
    # created once the old attempt's pods are gone and the restart's backoff passed
    assert until(reconciler, lambda: emulator.get("jobs", NS, f"cairn-{workload.pk}-2") is not None)
    deadline = emulator.get("jobs", NS, f"cairn-{workload.pk}-2")["spec"]["activeDeadlineSeconds"]
    assert 2590 <= deadline <= 2600


@pytest.mark.real_kube
def test_a_replica_failing_after_the_deadline_is_not_restarted(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, max_restarts=1, max_runtime_seconds=3600)
    # Past the limit, but within the deadline backstop (120 s): a reconciler pass that runs before
    # the pod's exit is seen must not enforce the deadline itself (that race failed under load).
    _run_for(workload, 3650)
    kubelet.terminated(NS, pods[0], exit_code=1)
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    failed = status_of(workload)
    assert failed.status_reason == "ReplicaFailed" and failed.attempt == 1 and failed.exit_code == 1
    assert failed.status_message == "Replica 0 exited with code 1. Not restarted: its run-time limit of 1h has passed."
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-2") is None


@pytest.fixture
def backstop(settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "DEADLINE_BACKSTOP_SECONDS": 60.0}


def test_a_job_still_running_after_its_limit_is_stopped_by_cairn(reconciler, make_workload, kubelet, emulator,
                                                                 backstop):
    """Emulator only: it fakes the run's elapsed time; the real Job's startTime (which the backstop counts from) is now."""
    workload, pods = running_training(make_workload, kubelet, max_runtime_seconds=3600)
    kubelet.running(NS, pods[0])
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    _run_for(workload, 3600 + 30)  # past the limit: the Job controller's to act, for now
    reconciler.reconcile_pass()
    assert status_of(workload).status == "running"

    _run_for(workload, 3600 + 61)  # it did not (its deadline edited out, a controller behind)
    assert until(reconciler, lambda: status_of(workload).status != "running")
    stopping = WorkloadEvent.objects.get(workload=workload, reason="DeadlineExceeded", to_status="stopping")
    assert "Kubernetes had not stopped it 1m after the limit" in stopping.message
    # The stop is a user's: the Job is deleted, its pods with it, and the run ends FAILED.
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    failed = status_of(workload)
    assert failed.status_reason == "DeadlineExceeded" and failed.attempt == 1
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None
    assert emulator.list("pods", NS) == []


def test_the_backstop_counts_from_the_jobs_own_start(reconciler, make_workload, kubelet, emulator, backstop):
    """Emulator only: the Job's startTime written by hand at a faked clock."""
    # With Kueue the Job starts (is unsuspended) later than Cairn dispatched it: its own clock decides.
    workload, pods = running_training(make_workload, kubelet, max_runtime_seconds=3600)
    kubelet.running(NS, pods[0])
    _run_for(workload, 3600 + 600)
    kubelet.job_started(NS, f"cairn-{workload.pk}-1", timezone.now() - timedelta(seconds=3000))
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    reconciler.reconcile_pass()
    assert status_of(workload).status == "running"
    kubelet.job_started(NS, f"cairn-{workload.pk}-1", timezone.now() - timedelta(seconds=3600 + 61))
    assert until(reconciler, lambda: status_of(workload).status != "running")
    assert status_of(workload).status_reason == "DeadlineExceeded"


def test_the_backstop_confirms_the_jobs_start_on_the_api_server(reconciler, make_workload, kubelet, backstop,
                                                                  monkeypatch):
    """Emulator only: the Job's startTime written by hand at a faked clock."""
    # The cache can lag behind the Job's new startTime (Kueue unsuspending it): a stop is not taken on it alone.
    workload, pods = running_training(make_workload, kubelet, max_runtime_seconds=3600)
    kubelet.running(NS, pods[0])
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    job = f"cairn-{workload.pk}-1"
    _run_for(workload, 3600 + 600)
    kubelet.job_started(NS, job, timezone.now() - timedelta(seconds=3000))
    jobs = reconciler.informers["jobs"]
    cached, stale = jobs.get, copy.deepcopy(jobs.get(NS, job))
    stale.get("status", {}).pop("startTime", None)
    monkeypatch.setattr(jobs, "get", lambda namespace, name: stale if name == job else cached(namespace, name))
    reconciler.reconcile_pass()
    assert status_of(workload).status == "running"
    kubelet.job_started(NS, job, timezone.now() - timedelta(seconds=3600 + 61))  # now over, on the server too
    assert until(reconciler, lambda: status_of(workload).status != "running")
    assert status_of(workload).status_reason == "DeadlineExceeded"
