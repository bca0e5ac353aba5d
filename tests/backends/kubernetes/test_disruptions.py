"""B2, disruptions are not user failures: a pod with a DisruptionTarget condition (drained,
preempted by kube-scheduler, evicted from a lost node) or on a node not Ready past the grace
requeues the gang without spending a restart; a Job's FailureTarget with any reason fails the
attempt; the next attempt waits for every pod of the last. Against the emulated API server here
(the test plays the controllers); test_real_blockers.py does the same through real ones."""
from datetime import UTC, datetime, timedelta

from apps.backends.kubernetes.manifests import ClusterOptions, workload_manifests
from apps.workloads.lifecycle import AttemptFailed, Facts, decide, facts_of
from apps.workloads.models import WorkloadEvent

from .test_manifests import by_kind, view
from .test_reconciler import NS, running_training, status_of, until


def _stamp(ago: float = 0.0) -> str:
    return (datetime.now(UTC) - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_job_ignores_disruptions_in_its_failure_count():
    spec = by_kind(workload_manifests(view(), ClusterOptions()))["Job"]["spec"]
    assert spec["podFailurePolicy"] == {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    assert spec["backoffLimit"] == 0 and spec["podReplacementPolicy"] == "Failed"


def test_a_free_attempt_spends_no_restart():
    failure = AttemptFailed(message="Replica 0 exited with code 1.", exit_code=1)
    assert decide(Facts(attempt=2, max_restarts=0), failure).kind == "fail"
    assert decide(Facts(attempt=2, max_restarts=0, free_attempts=1), failure).kind == "fail"  # its one try spent
    assert decide(Facts(attempt=2, max_restarts=1, free_attempts=1), failure).kind == "restart"


def test_a_drained_gang_is_requeued_without_spending_a_restart(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, replicas=2, max_restarts=0)
    for pod in pods:
        kubelet.running(NS, pod)
    kubelet.core.patch_namespaced_pod_status(pods[1], NS, {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
         "message": "Eviction API: evicting"}]}})
    assert until(reconciler, lambda: status_of(workload).status == "queued")
    done = status_of(workload)
    assert done.status_reason == "Disrupted" and "EvictionByEvictionAPI" in done.status_message
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None  # the rest of the gang goes too
    assert done.attempt == 1 and WorkloadEvent.objects.filter(workload=workload, reason="Disrupted").count() == 1
    # the requeue is a free attempt: with max_restarts 0, attempt 2 is still the workload's one try
    # (a failure of it now would not restart; counted as attempt 2 - 1 free = 1 <= 0 + 1)
    facts = facts_of(done)
    assert facts.free_attempts == 1
    assert decide(Facts(attempt=2, max_restarts=0, free_attempts=facts.free_attempts),
                  AttemptFailed(message="x", exit_code=1)).kind == "fail"
    assert decide(Facts(attempt=2, max_restarts=1, free_attempts=facts.free_attempts),
                  AttemptFailed(message="x", exit_code=1)).kind == "restart"


def test_a_lost_nodes_pods_are_requeued_after_the_grace(reconciler, make_workload, kubelet, emulator, settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "NODE_LOST_GRACE_SECONDS": 30}
    kubelet.add_node("gpu-a")
    workload, [pod] = running_training(make_workload, kubelet, replicas=1)
    kubelet.core.patch_namespaced_pod(pod, NS, {"spec": {"nodeName": "gpu-a"}})
    kubelet.running(NS, pod)
    kubelet.core.patch_node_status("gpu-a", {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "lastTransitionTime": _stamp(5)}]}})
    for _ in range(3):
        reconciler.reconcile_pass()
    assert status_of(workload).status == "running"  # within the grace: maybe a blip
    kubelet.core.patch_node_status("gpu-a", {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "lastTransitionTime": _stamp(60)}]}})
    assert until(reconciler, lambda: status_of(workload).status == "queued")
    assert "has not been Ready" in status_of(workload).status_message
    from apps.clusters.models import Node

    assert until(reconciler, lambda: Node.objects.get(name="gpu-a").health == "unhealthy")


def test_a_failure_target_of_any_reason_fails_the_attempt(reconciler, make_workload, kubelet):
    workload, [pod] = running_training(make_workload, kubelet, replicas=1)
    kubelet.running(NS, pod)
    kubelet.batch.patch_namespaced_job_status(f"cairn-{workload.pk}-1", NS, {"status": {"conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "PodFailurePolicy",
         "message": "Container main for pod x failed with exit code 3"}]}})
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    assert "PodFailurePolicy" in status_of(workload).status_message
