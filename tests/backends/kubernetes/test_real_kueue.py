"""Kueue as the one admission authority (issue 42, deliver 4), on the real control plane with
Kueue's real manager (sigs.k8s.io/kueue, built by scripts/build-kueue.sh, run by
tests/backends/kubernetes/kueue.py): Kueue's own Job reconciler makes the Workload for Cairn's
suspended Job, its scheduler reserves quota in a ClusterQueue and admits and unsuspends the Job,
or holds it with its own reason, and preempts lower priorities. kube-scheduler and kwok run the
pods; Cairn's reconciler follows. Nothing here plays Kueue."""
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.kubernetes import manifests as m
from apps.backends.kubernetes.status import KUEUE_JOB_UID_LABEL
from apps.backends.services import workload_dispatch
from apps.quotas.models import UsageRecord
from apps.quotas.services import usage_open
from apps.workloads.deadlines import CLOCK_AWAITS_PODS, run_deadline
from apps.workloads.lifecycle import FREE_REQUEUES, HELD_BY_QUEUE
from apps.workloads.models import Workload

from .conftest import eventually
from .kueue import KueueQueues, kueue_queues, real_kueue  # noqa: F401 (fixtures)

WAIT = 90  # Kueue, the Job controller, kube-scheduler and kwok each act in turn on a loaded machine
QUEUE = "team-queue"


@pytest.fixture
def queues(kueue_queues) -> KueueQueues:  # noqa: F811 - the fixture imported above
    """Kueue's running manager and this test's own ResourceFlavor / ClusterQueue (kueue.py)."""
    return kueue_queues


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def conditions_of(kueue_workload: dict) -> dict:
    return {c["type"]: c for c in (kueue_workload.get("status") or {}).get("conditions") or []}


def kueue_workload_of(queues, namespace: str, job) -> dict | None:
    """The Workload Kueue's Job reconciler made for the Job (labelled with the Job's uid)."""
    found = [w for w in queues.workloads(namespace)
             if (w["metadata"].get("labels") or {}).get(KUEUE_JOB_UID_LABEL) == job.metadata.uid]
    return found[0] if found else None


def cairn_job_under_kueue(real_kube, real_cluster, make_real_workload, **fields):
    real_cluster.config = {**(real_cluster.config or {}), "kueue_queue": QUEUE}
    real_cluster.save(update_fields=["config"])
    workload = make_real_workload(**fields)
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, job_name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}-1"
    job = real_kube.batch.read_namespaced_job(job_name, namespace)
    assert job.spec.suspend and job.metadata.labels[m.KUEUE_QUEUE_LABEL] == QUEUE
    return workload, namespace, job


def cairn_condition(workload, type_="Admitted") -> dict:
    return {c["type"]: c for c in status_of(workload).conditions}.get(type_, {})


def running_pods(real_kube, namespace, workload) -> int:
    return len([p for p in real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}")
                if p.status.phase == "Running"])


def test_job_within_the_cluster_queues_quota_is_admitted_by_kueue_and_runs(
        real_kube, real_cluster, real_reconciler, make_real_workload, queues):
    queues.cluster_queue_with(gpus=4)
    workload, namespace, job = cairn_job_under_kueue(real_kube, real_cluster, make_real_workload,
                                                     replicas=2, gpu_milli=1000)
    queues.local_queue(namespace, QUEUE)
    until = lambda check: eventually(check, step=real_reconciler.reconcile_pass, timeout=WAIT)  # noqa: E731

    admitted = lambda: conditions_of(kueue_workload_of(queues, namespace, job) or {}).get(  # noqa: E731
        "Admitted", {}).get("status") == "True"
    assert eventually(admitted, timeout=WAIT), (queues.workloads(namespace), queues.manager.tail())
    kueue_wl = kueue_workload_of(queues, namespace, job)
    assert kueue_wl["status"]["admission"]["clusterQueue"] == queues.cluster_queue
    assert eventually(lambda: not real_kube.batch.read_namespaced_job(job.metadata.name, namespace).spec.suspend,
                      timeout=WAIT), "Kueue admitted the Workload but never unsuspended the Job"
    assert eventually(lambda: running_pods(real_kube, namespace, workload) == 2, timeout=WAIT), \
        real_kube.describe(namespace)
    assert until(lambda: cairn_condition(workload).get("reason") == "AdmittedByKueue"), status_of(workload).conditions
    assert cairn_condition(workload)["status"] == "True"
    assert status_of(workload).status == "running"


def test_job_beyond_the_cluster_queues_quota_is_held_with_kueues_reason(
        real_kube, real_cluster, real_reconciler, make_real_workload, queues):
    queues.cluster_queue_with(gpus=1)
    workload, namespace, job = cairn_job_under_kueue(real_kube, real_cluster, make_real_workload,
                                                     replicas=2, gpu_milli=1000)
    queues.local_queue(namespace, QUEUE)

    def kueue_says_no_quota():
        reserved = conditions_of(kueue_workload_of(queues, namespace, job) or {}).get("QuotaReserved", {})
        return reserved.get("status") == "False" and "nvidia.com/gpu" in (reserved.get("message") or "")

    assert eventually(kueue_says_no_quota, timeout=WAIT), queues.workloads(namespace)
    kueue_message = conditions_of(kueue_workload_of(queues, namespace, job))["QuotaReserved"]["message"]
    assert eventually(lambda: cairn_condition(workload).get("message") == f"Kueue holds the Job: {kueue_message}",
                      step=real_reconciler.reconcile_pass, timeout=WAIT), (status_of(workload).conditions,
                                                                           kueue_message)
    assert cairn_condition(workload)["status"] == "False"
    held = status_of(workload)
    assert held.status == "running" and run_deadline(held) is None  # a reservation: no pods, no clock
    assert real_kube.batch.read_namespaced_job(job.metadata.name, namespace).spec.suspend
    assert not real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}")


def test_kueue_preempting_the_job_for_a_higher_priority_requeues_it_without_spending_a_restart(
        real_kube, real_cluster, real_reconciler, make_real_workload, queues):
    queues.cluster_queue_with(gpus=2, preemption={"withinClusterQueue": "LowerPriority"})
    workload, namespace, job = cairn_job_under_kueue(real_kube, real_cluster, make_real_workload,
                                                     replicas=2, gpu_milli=1000, max_restarts=0)
    queues.local_queue(namespace, QUEUE)
    until = lambda check: eventually(check, step=real_reconciler.reconcile_pass, timeout=WAIT)  # noqa: E731
    assert eventually(lambda: running_pods(real_kube, namespace, workload) == 2, timeout=WAIT), \
        (queues.workloads(namespace), real_kube.describe(namespace))
    assert until(lambda: cairn_condition(workload).get("reason") == "AdmittedByKueue"), status_of(workload).conditions

    # Another tenant's Job of a higher WorkloadPriorityClass wants the same 2 GPUs.
    priority = f"urgent-{queues.suffix}"
    queues.priority_class(priority, 1000)
    real_kube.batch.create_namespaced_job(namespace, {
        "metadata": {"name": "urgent", "labels": {m.KUEUE_QUEUE_LABEL: QUEUE,
                                                  "kueue.x-k8s.io/priority-class": priority}},
        "spec": {"suspend": True, "parallelism": 2, "completions": 2, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "python:3.12-slim", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}}})

    def preempted():
        evicted = conditions_of(kueue_workload_of(queues, namespace, job) or {}).get("Evicted", {})
        return evicted.get("status") == "True" and evicted.get("reason") == "Preempted"

    assert eventually(preempted, timeout=WAIT), queues.workloads(namespace)
    assert until(lambda: status_of(workload).status == "queued"), (status_of(workload).conditions,
                                                                   real_kube.describe(namespace))
    requeued = status_of(workload)
    assert requeued.status_reason == HELD_BY_QUEUE and "Preempted" in requeued.status_message
    # no restart spent: max_restarts 0, yet the next admission may run it again
    assert requeued.events.filter(reason__in=FREE_REQUEUES, to_status="queued").count() == 1
    urgent = real_kube.batch.read_namespaced_job("urgent", namespace)
    assert eventually(lambda: conditions_of(kueue_workload_of(queues, namespace, urgent) or {}).get(
        "Admitted", {}).get("status") == "True", timeout=WAIT), queues.workloads(namespace)


def test_run_time_clock_starts_when_kueues_pods_run_not_at_cairns_admission(
        real_kube, real_cluster, real_reconciler, make_real_workload, queues):
    """Cairn's admission is a reservation under Kueue: while Kueue holds the Job the run has no
    deadline and no GPU-hour charge; the clock (`started_at`, the usage interval) starts when the
    first replica runs. Kueue holds it here because its LocalQueue does not exist yet."""
    queues.cluster_queue_with(gpus=4)
    admitted_at = timezone.now()
    workload, namespace, job = cairn_job_under_kueue(
        real_kube, real_cluster, make_real_workload, replicas=1, gpu_milli=1000, max_runtime_seconds=600,
        admitted_at=admitted_at)
    usage_open(workload=workload, at=workload.admitted_at)  # as the scheduler's admission does
    assert job.spec.active_deadline_seconds == 600  # the Job's clock starts unsuspended
    assert status_of(workload).runtime[CLOCK_AWAITS_PODS] and run_deadline(status_of(workload)) is None

    held_until = time.time() + 4  # Kueue holds it a while; Cairn's passes go on
    while time.time() < held_until:
        real_reconciler.reconcile_pass()
        time.sleep(0.3)
    held = status_of(workload)
    assert held.status == "running" and run_deadline(held) is None
    assert UsageRecord.objects.get(workload=workload).started_at == workload.admitted_at  # not moved yet
    assert real_kube.batch.read_namespaced_job(job.metadata.name, namespace).spec.suspend

    queues.local_queue(namespace, QUEUE)  # Kueue admits and unsuspends it
    assert eventually(lambda: CLOCK_AWAITS_PODS not in status_of(workload).runtime,
                      step=real_reconciler.reconcile_pass, timeout=WAIT), real_kube.describe(namespace)
    started = status_of(workload)
    pod = real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}")[0]
    assert abs((started.started_at - pod.status.container_statuses[0].state.running.started_at).total_seconds()) < 1.5
    assert started.started_at - workload.admitted_at >= timedelta(seconds=3)  # the 4 s hold is not run time
    assert run_deadline(started) == started.started_at + timedelta(seconds=600)
    assert UsageRecord.objects.get(workload=workload).started_at == started.started_at
