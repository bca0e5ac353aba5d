"""Preemption on Kubernetes: a preempted workload holds its resources while its pods exit (SIGTERM =
Job deleted / set scaled to zero, forced after the grace period), then goes back to QUEUED with its
attempt count, and its next admission starts a new attempt (training) or scales its set back up
(notebooks, deployments). Driven with the real client against the emulated API server."""
import pytest

from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.services import workload_preempt, workload_stop, workload_transition
from tests.factories import ProjectFactory, QuotaFactory, WorkloadFactory

from .conftest import eventually
from .test_reconciler import NS, running_training, status_of, until

pytestmark = pytest.mark.django_db(transaction=True)


def _linger(kubelet, pod: str, namespace: str = NS) -> None:
    """The pod outlives its owner's deletion (a terminating pod whose container ignores SIGTERM):
    the emulator only cascades to pods that still name an owner."""
    kubelet.core.patch_namespaced_pod(pod, namespace, {"metadata": {"ownerReferences": None}})


@pytest.mark.real_kube
def test_preempted_training_is_requeued_once_its_pods_are_gone_and_restarts_as_a_new_attempt(
        reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, replicas=2)
    for pod in pods:
        kubelet.running(NS, pod)
    _linger(kubelet, pods[1])
    assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message="Preempted by a test.") is not None
    workload_stop_signal(workload_id=workload.pk)
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None  # SIGTERM: the Job is deleted
    # the garbage collector ends the other pod (on a real server shortly after, not at once)
    assert eventually(lambda: [p["metadata"]["name"] for p in emulator.list("pods", NS)] == [pods[1]], timeout=30)

    reconciler.reconcile_pass()
    assert status_of(workload).status == "stopping"  # a pod is still alive: it keeps its resources
    assert until(reconciler, lambda: status_of(workload).status == "queued")  # forced after the 0.5s grace
    assert emulator.list("pods", NS) == []
    requeued = status_of(workload)
    assert requeued.status_reason == "Requeued" and "after attempt 1" in requeued.status_message
    assert requeued.attempt == 1 and requeued.preemptions == 1 and requeued.placement == []
    assert requeued.stop_cause == "" and requeued.runtime["alive"] is False
    reconciler.reconcile_pass()
    assert status_of(workload).status == "queued"  # nothing left to act on

    # Admitted again: the next dispatch starts attempt 2 as a new Job.
    workload_transition(workload_id=workload.pk, from_statuses={"queued"}, to_status="admitted", reason="Admitted",
                        placement=[{"replica": 0, "node": "n1", "gpus": [0]}, {"replica": 1, "node": "n1",
                                                                                "gpus": [1]}])
    workload_dispatch(workload_id=workload.pk)
    again = status_of(workload)
    assert again.status == "running" and again.attempt == 2
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-2") is not None


@pytest.mark.real_kube
def test_stopping_a_workload_while_it_is_preempted_ends_it_stopped(reconciler, make_workload, kubelet):
    workload, pods = running_training(make_workload, kubelet)
    kubelet.running(NS, pods[0])
    workload_preempt(workload_id=workload.pk, preemptor_id=None, message="Preempted by a test.")
    workload_stop(workload=status_of(workload))
    workload_stop_signal(workload_id=workload.pk)
    assert until(reconciler, lambda: status_of(workload).status == "stopped")


def test_preempted_notebook_scales_to_zero_is_requeued_and_scales_back_up_when_admitted_again(
        reconciler, make_workload, kubelet, emulator):
    """Emulator only: a pod that outlives SIGTERM needs a kubelet (kwok ends pods at once)."""
    workload = make_workload(kind="notebook", spec={"env": {}})
    workload_dispatch(workload_id=workload.pk)
    name = f"cairn-{workload.pk}"
    [pod] = kubelet.start_set_pods(NS, "StatefulSet", name)
    kubelet.running(NS, pod)
    workload_preempt(workload_id=workload.pk, preemptor_id=None, message="Preempted by a test.")
    workload_stop_signal(workload_id=workload.pk)
    assert emulator.get("statefulsets", NS, name)["spec"]["replicas"] == 0
    reconciler.reconcile_pass()
    assert status_of(workload).status == "stopping"
    assert until(reconciler, lambda: status_of(workload).status == "queued")
    assert emulator.list("pods", NS) == []
    assert emulator.get("persistentvolumeclaims", NS, f"{name}-home") is not None  # the home is kept

    workload_transition(workload_id=workload.pk, from_statuses={"queued"}, to_status="admitted", reason="Admitted",
                        placement=[{"replica": 0, "node": "gpu-b", "gpus": [0]}])
    workload_dispatch(workload_id=workload.pk)
    assert status_of(workload).status == "running"
    spec = emulator.get("statefulsets", NS, name)["spec"]
    assert spec["replicas"] == 1
    affinity = spec["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    hosts = [e["values"] for term in affinity["nodeSelectorTerms"] for e in term["matchExpressions"]
             if e["key"] == "kubernetes.io/hostname"]
    assert hosts == [["gpu-b"]]  # the new placement, not the old one
    [env_from] = spec["template"]["spec"]["containers"][0]["envFrom"]
    assert env_from["secretRef"]["name"] == f"cairn-{workload.pk}-2-run"  # the new attempt's run


@pytest.mark.real_kube
def test_borrow_then_reclaim_on_kubernetes_admits_the_reclaimer_after_the_victims_pods_are_gone(
        reconciler, k8s_pool, k8s_project, kubelet, emulator):
    kubelet.add_node("gpu-a", gpus=4)
    assert until(reconciler, lambda: k8s_pool.nodes.filter(name="gpu-a").exists())
    nlp = ProjectFactory(slug="nlp")
    QuotaFactory(project=k8s_project, pool=k8s_pool, nominal_gpu_milli=2000)
    QuotaFactory(project=nlp, pool=k8s_pool, nominal_gpu_milli=2000)

    def job(project, name):
        return WorkloadFactory(project=project, pool=k8s_pool, name=name, gpu_milli=2000, cpu_milli=1000,
                               memory_mb=1024, spec={"command": ["train"], "env": {}})

    own, borrowed = job(k8s_project, "own"), job(k8s_project, "borrowed")
    assert scheduling_cycle().admitted == 2  # nlp is idle: vision borrows its 2 GPUs
    for w in (own, borrowed):
        workload_dispatch(workload_id=w.pk)
        for pod in kubelet.start_job_pods(NS, f"cairn-{w.pk}-1"):
            kubelet.running(NS, pod)

    reclaimer = job(nlp, "reclaim")
    result = scheduling_cycle()
    assert (result.admitted, result.preempted) == (0, 1)
    assert status_of(borrowed).status == "stopping" and status_of(own).status == "running"
    workload_stop_signal(workload_id=borrowed.pk)
    assert until(reconciler, lambda: status_of(borrowed).status == "queued")
    assert scheduling_cycle().admitted == 1
    assert status_of(reclaimer).status == "admitted"
    waiting = status_of(borrowed)
    assert waiting.status == "queued" and waiting.pending_reason.startswith("quota:")
    assert WorkloadEvent.objects.filter(workload=borrowed, reason="Requeued").count() == 1
    assert Workload.objects.get(pk=own.pk).status == "running"
