"""Volcano as the one admission authority (issue 42, deliver 4), on the real control plane. What
is real: the API server serving the PodGroup API (scheduling.volcano.sh/v1beta1, the CRD the
control plane fixture installs), the Job controller creating the gang's pods with
`schedulerName: volcano` (so kube-scheduler leaves them alone), kwok running them once bound,
Cairn's reconciler. What the test drives: Volcano's scheduler and controllers, which are not built
here (the Go module proxy answers 403 for volcano.sh/volcano; docs/kubernetes.md): it writes the
PodGroup's status (phase and conditions) and binds the pods, as Volcano does."""
import time
from datetime import UTC, datetime, timedelta

from django.utils import timezone
from kubernetes import client as k8s

from apps.backends.kubernetes import manifests as m
from apps.backends.kubernetes.status import VOLCANO_PODGROUPS
from apps.backends.services import workload_dispatch
from apps.quotas.models import UsageRecord
from apps.quotas.services import usage_open
from apps.workloads.deadlines import CLOCK_AWAITS_PODS, run_deadline
from apps.workloads.lifecycle import FREE_REQUEUES
from apps.workloads.models import Workload

from .conftest import eventually

WAIT = 60
UNSCHEDULABLE = "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def conditions(workload) -> dict:
    return {c["type"]: c for c in status_of(workload).conditions}


def test_volcano_podgroup_phases_become_cairns_conditions_and_its_clock_starts_with_the_pods(
        real_kube, real_cluster, real_pool, real_reconciler, make_real_workload):
    real_cluster.config = {**(real_cluster.config or {}), "volcano": True, "volcano_queue": "research"}
    real_cluster.save(update_fields=["config"])
    real_pool.pending_timeout_seconds = 2  # Volcano decides while it holds the gang: no pending timeout
    real_pool.save(update_fields=["pending_timeout_seconds"])
    placement = [{"replica": 0, "node": "h100-0", "gpus": [0]}, {"replica": 1, "node": "h100-0", "gpus": [1]}]
    workload = make_real_workload(replicas=2, gpu_milli=1000, max_restarts=0, max_runtime_seconds=3600,
                                  placement=placement, admitted_at=timezone.now())
    usage_open(workload=workload, at=workload.admitted_at)  # as the scheduler's admission does
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}-1"
    custom = k8s.CustomObjectsApi(real_kube.api)
    group, version, plural = VOLCANO_PODGROUPS
    podgroup = custom.get_namespaced_custom_object(group, version, namespace, plural, name)
    assert podgroup["spec"]["minMember"] == 2 and podgroup["spec"]["queue"] == "research"
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    assert eventually(lambda: len(real_kube.pods(namespace, selector)) == 2, timeout=WAIT), real_kube.describe(namespace)
    for pod in real_kube.pods(namespace, selector):
        assert pod.spec.scheduler_name == "volcano" and pod.metadata.annotations[m.VOLCANO_GROUP_ANNOTATION] == name
    # launched into Volcano's queue: a reservation, no run-time clock yet
    assert status_of(workload).runtime[CLOCK_AWAITS_PODS] and run_deadline(status_of(workload)) is None
    until = lambda check: eventually(check, step=real_reconciler.reconcile_pass, timeout=WAIT)  # noqa: E731

    def set_status(phase, *conds):
        custom.patch_namespaced_custom_object_status(group, version, namespace, plural, name, {"status": {
            "phase": phase, "conditions": [{**c, "lastTransitionTime": now()} for c in conds]}})

    # Pending: Volcano's queue "research" has no room for the gang.
    set_status("Pending", {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                           "message": "queue resource quota insufficient"})
    assert until(lambda: conditions(workload).get("Admitted", {}).get("reason") == "NotEnoughResources"), \
        status_of(workload).conditions
    admitted, gang = conditions(workload)["Admitted"], conditions(workload)["GangScheduled"]
    assert admitted["status"] == "False" and "queue resource quota insufficient" in admitted["message"]
    assert gang["status"] == "False" and "PodGroup Pending" in gang["message"]
    assert status_of(workload).events.filter(reason="NotEnoughResources", type="Warning").exists()
    held_since = time.time()
    while time.time() - held_since < 3:  # past the pool's 2 s pending timeout: still Volcano's to decide
        real_reconciler.reconcile_pass()
        time.sleep(0.3)
    assert status_of(workload).status == "running"
    assert all(not p.spec.node_name for p in real_kube.pods(namespace, selector))

    # Inqueue: the queue took it in; the gang does not fit the nodes yet.
    set_status("Inqueue", {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                           "message": UNSCHEDULABLE})
    assert until(lambda: conditions(workload).get("Admitted", {}).get("status") == "True"), status_of(workload).conditions
    assert conditions(workload)["Admitted"]["reason"] == "AdmittedByVolcano"
    assert conditions(workload)["GangScheduled"]["message"] == f"PodGroup Inqueue: {UNSCHEDULABLE}"
    assert run_deadline(status_of(workload)) is None  # still no pods running: no clock

    # Volcano binds the gang and the PodGroup runs: kwok starts the pods; Cairn's clock starts.
    for pod in real_kube.pods(namespace, selector):
        real_kube.core.create_namespaced_pod_binding(pod.metadata.name, namespace, {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod.metadata.name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "h100-0"}}, _preload_content=False)
    running = lambda: [p for p in real_kube.pods(namespace, selector) if p.status.phase == "Running"]  # noqa: E731
    assert eventually(lambda: len(running()) == 2, timeout=WAIT), real_kube.describe(namespace)
    set_status("Running", {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
                           "message": ""})
    assert until(lambda: conditions(workload).get("GangScheduled", {}).get("status") == "True"), \
        status_of(workload).conditions
    started = status_of(workload)
    assert CLOCK_AWAITS_PODS not in started.runtime
    first_running = min(c.state.running.started_at for p in running() for c in p.status.container_statuses)
    assert abs((started.started_at - first_running).total_seconds()) < 1.5, (started.started_at, first_running)
    assert started.started_at - workload.admitted_at >= timedelta(seconds=2)  # the 3 s hold is not counted (startedAt: whole seconds)
    assert run_deadline(started) == started.started_at + timedelta(seconds=3600)
    usage = UsageRecord.objects.get(workload=workload, ended_at__isnull=True)
    assert usage.started_at == started.started_at  # the GPU-hour charge starts with the pods too
    assert started.events.filter(reason="ReplicasRunning").count() == 1

    # Volcano reclaims the gang for another queue: its pods evicted, the PodGroup back to Inqueue.
    set_status("Inqueue", {"type": "Unschedulable", "status": "True", "reason": "Evicted",
                           "message": "reclaimed by queue training"})
    for pod in real_kube.pods(namespace, selector):
        real_kube.core.delete_namespaced_pod(pod.metadata.name, namespace)
    assert until(lambda: status_of(workload).status == "queued"), (
        status_of(workload).status, sorted(status_of(workload).runtime.items())[-4:], status_of(workload).conditions[-2:],
        real_kube.describe(namespace))
    requeued = status_of(workload)
    assert requeued.status_reason == "HeldByQueue" and "reclaimed by queue training" in requeued.status_message
    assert requeued.events.filter(reason__in=FREE_REQUEUES, to_status="queued").count() == 1  # no restart spent
    assert UsageRecord.objects.filter(workload=workload, ended_at__isnull=True).count() == 0
