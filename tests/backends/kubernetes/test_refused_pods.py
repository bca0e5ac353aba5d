"""B1, refused pods: a controller that cannot create a workload's pods (Pod Security refusing
them, a quota) records FailedCreate Warning events on its Job / StatefulSet / ReplicaSet and
retries forever; Cairn shows them as the condition PodsCreated and fails the workload after
POD_CREATE_TIMEOUT_SECONDS, releasing its quota. Against the emulated API server (the event is
created by the test as the controller would); test_real_blockers.py has the real Pod Security
refusal through a real Job controller."""
from datetime import UTC, datetime

from apps.backends.services import workload_dispatch

from .test_reconciler import NS, condition, status_of, until

REFUSAL = ('pods "cairn-1-1-0-abcde" is forbidden: violates PodSecurity "restricted:latest": hostPath volumes '
           '(volume "scratch")')


def refused(emulator, kind, name, *, new_style=True):
    """A FailedCreate event as the controller records it; `new_style`: through events.k8s.io/v1
    (eventTime and no lastTimestamp), as current controllers do."""
    now = datetime.now(UTC)
    times = ({"eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "reportingController": "job-controller",
              "reportingInstance": "kcm", "action": "Create"} if new_style
             else {"lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ")})
    emulator.create("events", {"metadata": {"name": f"{name}.fc", "namespace": NS}, "type": "Warning",
                               "reason": "FailedCreate", "message": f"Error creating: {REFUSAL}",
                               "involvedObject": {"kind": kind, "name": name, "namespace": NS}, **times}, NS)


def test_a_training_jobs_refused_pods_become_a_condition_then_fail_it(reconciler, make_workload, emulator,
                                                                      settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "POD_CREATE_TIMEOUT_SECONDS": 3600}
    workload = make_workload(kind="training", replicas=2)
    workload_dispatch(workload_id=workload.pk)
    refused(emulator, "Job", f"cairn-{workload.pk}-1")
    assert until(reconciler, lambda: condition(workload, "PodsCreated").get("status") == "False")
    cond = condition(workload, "PodsCreated")
    assert cond["reason"] == "FailedCreate" and "violates PodSecurity" in cond["message"]
    assert status_of(workload).status == "running"
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "POD_CREATE_TIMEOUT_SECONDS": 0}
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    done = status_of(workload)
    assert done.status_reason == "FailedCreate" and "violates PodSecurity" in done.status_message
    # then stopped like any finished workload: its Job is deleted, the controller stops retrying
    assert until(reconciler, lambda: emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None)


def test_a_deployments_refused_replicaset_pods_count_too(reconciler, make_workload, emulator, settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "POD_CREATE_TIMEOUT_SECONDS": 3600}
    workload = make_workload(kind="deployment", spec={"command": ["serve"], "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    refused(emulator, "ReplicaSet", f"cairn-{workload.pk}-7d9f8b6c5", new_style=False)
    refused(emulator, "ReplicaSet", f"cairn-{workload.pk + 1000}-7d9f8b6c5")  # another workload's: not this one's
    assert until(reconciler, lambda: condition(workload, "PodsCreated").get("status") == "False")
    assert "ReplicaSet controller" in condition(workload, "PodsCreated")["message"]


def test_an_event_of_another_attempt_is_not_this_ones(reconciler, make_workload, emulator, kubelet):
    workload = make_workload(kind="training", replicas=1)
    workload_dispatch(workload_id=workload.pk)
    refused(emulator, "Job", f"cairn-{workload.pk}-9")
    reconciler.reconcile_pass()
    reconciler.reconcile_pass()
    assert condition(workload, "PodsCreated") == {}
