"""Self-healing through the Kubernetes backend, against the emulated API server (no real cluster):
a hung training job's Job is deleted and recreated as the next attempt; a gang on a node that
turns unhealthy is moved: its Job deleted, the workload requeued, and the next attempt's Job keeps
off the node with a NotIn node affinity term; training pods carry the checkpoint volume."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.services import workload_dispatch
from apps.clusters.choices import NodeHealth
from apps.clusters.models import Node
from apps.clusters.services import node_cordon
from apps.training.models import ReplicaProgress
from apps.training.services import replica_progress_record
from apps.workloads.models import Workload, WorkloadEvent
from tests.backends.kubernetes.test_reconciler import NS, running_training, status_of, until


def _pod_spec(emulator, job):
    return emulator.get("jobs", NS, job)["spec"]["template"]["spec"]


@pytest.mark.real_kube
def test_a_hung_job_is_restarted_as_a_new_job(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, replicas=2, max_restarts=1,
                                      spec={"command": ["python", "train.py"], "hang_timeout_seconds": 30})
    for pod in pods:
        kubelet.running(NS, pod)
    for replica in (0, 1):
        replica_progress_record(workload_id=workload.pk, attempt=1, replica=replica, step=10, steps=[(10, 0.1)])
    assert until(reconciler, lambda: status_of(workload).status == "running")
    assert status_of(workload).attempt == 1  # progressing: nothing happens
    long_ago = timezone.now() - timedelta(seconds=60)
    ReplicaProgress.objects.filter(workload=workload).update(step_changed_at=long_ago)
    Workload.objects.filter(pk=workload.pk).update(started_at=long_ago)

    assert until(reconciler, lambda: status_of(workload).attempt == 2)
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None
    # created once the old attempt's pods are gone and the restart's backoff passed
    assert until(reconciler, lambda: emulator.get("jobs", NS, f"cairn-{workload.pk}-2") is not None)
    hung = WorkloadEvent.objects.filter(workload=workload, reason="Hung")
    assert hung.count() == 2  # the diagnosis and the restart it caused
    assert "no step progress and wrote no output for 30s" in hung.first().message


def test_a_gang_on_an_unhealthy_node_moves_and_its_next_job_avoids_the_node(reconciler, make_workload, kubelet,
                                                                             emulator, k8s_pool):
    """Emulator only: it counts the cluster's nodes (the real one has the session's)."""
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        kubelet.add_node(name)
    assert until(reconciler, lambda: Node.objects.filter(cluster=k8s_pool.cluster).count() == 3)
    workload, pods = running_training(make_workload, kubelet, replicas=2, max_restarts=2,
                                      placement=[{"replica": 0, "node": "gpu-a"}, {"replica": 1, "node": "gpu-b"}])
    pod = _pod_spec(emulator, f"cairn-{workload.pk}-1")
    assert {v["name"] for v in pod["volumes"]} == {"checkpoints", "dshm", "home"}
    assert emulator.get("persistentvolumeclaims", NS, f"cairn-{workload.pk}-checkpoints") is not None
    for name in pods:
        kubelet.running(NS, name)
    node_cordon(node=Node.objects.get(cluster=k8s_pool.cluster, name="gpu-b"), reason="XID 79",
                health=NodeHealth.UNHEALTHY, message="GPU fell off the bus.")  # as telemetry does

    assert until(reconciler, lambda: status_of(workload).status == "queued")
    moved = status_of(workload)
    assert moved.status_reason == "NodeUnhealthy" and "Node gpu-b is unhealthy (XID 79)" in moved.status_message
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None  # the attempt's Job is deleted

    Workload.objects.filter(pk=workload.pk).update(status="admitted", placement=[
        {"replica": 0, "node": "gpu-a"}, {"replica": 1, "node": "gpu-c"}])
    assert not emulator.list("pods", NS, label_selector=f"cairn.dev/workload={workload.pk}")  # all ranks gone
    workload_dispatch(workload_id=workload.pk)
    assert status_of(workload).attempt == 2
    expressions = _pod_spec(emulator, f"cairn-{workload.pk}-2")["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-b"]} in expressions
