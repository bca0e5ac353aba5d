"""Kueue as the one admission authority (issue 42, deliver 4), on the real control plane with
Kueue's own Workload CRD, taken from the sigs.k8s.io/kueue module (config/components/crd). What is
real: the API server serving and validating Kueue's Workload API, the Job controller honouring
`suspend`, kube-scheduler and kwok running the pods, Cairn's reconciler. What the test drives:
Kueue's controller (it builds from the module proxy but takes over an hour here, too slow for the
suite): the test creates the Workload Kueue would make for the Job and writes its conditions
(held, admitted, preempted) and the Job's `suspend` as Kueue does."""
import json
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from apps.backends.kubernetes import manifests as m
from apps.backends.kubernetes.status import KUEUE_JOB_UID_LABEL, KUEUE_WORKLOADS
from apps.backends.services import workload_dispatch
from apps.quotas.models import UsageRecord
from apps.quotas.services import usage_open
from apps.workloads.deadlines import CLOCK_AWAITS_PODS, run_deadline
from apps.workloads.lifecycle import FREE_REQUEUES
from apps.workloads.models import Workload

from .conftest import eventually

KUEUE = "sigs.k8s.io/kueue@v0.17.0"
WAIT = 60


def kueue_crd() -> dict:
    """Kueue's Workload CRD from the module source (go mod download: the Go module proxy)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    found = subprocess.run(["go", "mod", "download", "-json", KUEUE], capture_output=True, text=True, env=env,
                           timeout=300, cwd="/")
    assert found.returncode == 0, f"go mod download {KUEUE} failed: {found.stderr or found.stdout}"
    path = Path(json.loads(found.stdout)["Dir"]) / "config/components/crd/bases/kueue.x-k8s.io_workloads.yaml"
    import yaml

    return yaml.safe_load(path.read_text())


@pytest.fixture
def kueue_api(real_kube):
    ext = k8s.ApiextensionsV1Api(real_kube.api)
    name = "workloads.kueue.x-k8s.io"
    try:
        ext.read_custom_resource_definition(name)
    except k8s.ApiException as exc:
        assert exc.status == 404
        ext.create_custom_resource_definition(kueue_crd())
    established = lambda: any(c.type == "Established" and c.status == "True"  # noqa: E731
                              for c in ext.read_custom_resource_definition(name).status.conditions or [])
    assert eventually(established, timeout=WAIT), "Kueue's Workload CRD was never established"
    return k8s.CustomObjectsApi(real_kube.api)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(type_, status, reason, message=""):
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def test_kueue_holds_admits_and_preempts_and_cairn_follows(real_kube, real_cluster, real_reconciler,
                                                           make_real_workload, kueue_api):
    real_cluster.config = {**(real_cluster.config or {}), "kueue_queue": "team-queue"}
    real_cluster.save(update_fields=["config"])
    workload = make_real_workload(replicas=2, gpu_milli=1000, max_restarts=0)
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, job_name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}-1"
    job = real_kube.batch.read_namespaced_job(job_name, namespace)
    assert job.spec.suspend and job.metadata.labels[m.KUEUE_QUEUE_LABEL] == "team-queue"
    until = lambda check: eventually(check, step=real_reconciler.reconcile_pass, timeout=WAIT)  # noqa: E731
    admitted = lambda: {c["type"]: c for c in status_of(workload).conditions}.get("Admitted", {})  # noqa: E731

    # Kueue's job controller makes a Workload for the Job; no quota in its ClusterQueue yet.
    group, version, plural = KUEUE_WORKLOADS
    kueue_api.create_namespaced_custom_object(group, version, namespace, plural, {
        "apiVersion": f"{group}/{version}", "kind": "Workload",
        "metadata": {"name": f"job-{job_name}", "labels": {KUEUE_JOB_UID_LABEL: job.metadata.uid},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                                          "uid": job.metadata.uid, "controller": True}]},
        "spec": {"queueName": "team-queue", "podSets": [{"name": "main", "count": 2, "template": {
            "spec": {"containers": [{"name": "main", "image": "python:3.12-slim"}]}}}]}})
    held = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100"

    def set_status(*conditions):
        kueue_api.patch_namespaced_custom_object_status(group, version, namespace, plural, f"job-{job_name}",
                                                        {"status": {"conditions": list(conditions)}})

    set_status(condition("QuotaReserved", "False", "Pending", held))
    assert until(lambda: admitted().get("message") == f"Kueue holds the Job: {held}"), status_of(workload).conditions
    assert admitted()["status"] == "False" and admitted()["reason"] == "Pending"
    assert status_of(workload).status == "running" and not real_kube.pods(namespace)  # a reservation, no pods

    # Kueue admits it: its conditions, then the Job unsuspended; the pods run.
    set_status(condition("QuotaReserved", "True", "QuotaReserved"), condition("Admitted", "True", "Admitted"))
    real_kube.batch.patch_namespaced_job(job_name, namespace, {"spec": {"suspend": False}})
    assert until(lambda: admitted().get("status") == "True"), status_of(workload).conditions
    running = lambda: len([p for p in real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}")  # noqa: E731
                           if p.status.phase == "Running"]) == 2
    assert eventually(running, timeout=WAIT), real_kube.describe(namespace)

    # Kueue preempts it for a higher priority: Evicted, and the Job suspended again.
    set_status(condition("QuotaReserved", "False", "Pending"), condition("Admitted", "False", "NoReservation"),
               condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload of higher priority"))
    real_kube.batch.patch_namespaced_job(job_name, namespace, {"spec": {"suspend": True}})
    assert until(lambda: status_of(workload).status == "queued"), (status_of(workload).conditions,
                                                                   real_kube.describe(namespace))
    requeued = status_of(workload)
    assert requeued.status_reason == "HeldByQueue" and "Preempted" in requeued.status_message
    # no restart spent: max_restarts 0, yet the next admission may run it again
    assert requeued.events.filter(reason__in=FREE_REQUEUES, to_status="queued").count() == 1


def test_run_time_clock_starts_when_kueues_pods_run_not_at_cairns_admission(
        real_kube, real_cluster, real_reconciler, make_real_workload, kueue_api):
    """Cairn's admission is a reservation under Kueue: while Kueue holds the Job the run has no
    deadline and no GPU-hour charge; the clock (`started_at`, the usage interval) starts when the
    first replica runs."""
    real_cluster.config = {**(real_cluster.config or {}), "kueue_queue": "team-queue"}
    real_cluster.save(update_fields=["config"])
    workload = make_real_workload(replicas=1, gpu_milli=1000, max_runtime_seconds=600, admitted_at=timezone.now())
    usage_open(workload=workload, at=workload.admitted_at)  # as the scheduler's admission does
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, job_name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}-1"
    job = real_kube.batch.read_namespaced_job(job_name, namespace)
    assert job.spec.suspend and job.spec.active_deadline_seconds == 600  # the Job's clock starts unsuspended
    assert status_of(workload).runtime[CLOCK_AWAITS_PODS] and run_deadline(status_of(workload)) is None

    group, version, plural = KUEUE_WORKLOADS
    kueue_api.create_namespaced_custom_object(group, version, namespace, plural, {
        "apiVersion": f"{group}/{version}", "kind": "Workload",
        "metadata": {"name": f"job-{job_name}", "labels": {KUEUE_JOB_UID_LABEL: job.metadata.uid}},
        "spec": {"queueName": "team-queue", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "main", "image": "python:3.12-slim"}]}}}]}})
    kueue_api.patch_namespaced_custom_object_status(group, version, namespace, plural, f"job-{job_name}", {
        "status": {"conditions": [condition("QuotaReserved", "False", "Pending", "insufficient unused quota")]}})
    held_until = time.time() + 4  # Kueue holds it a while; Cairn's passes go on
    while time.time() < held_until:
        real_reconciler.reconcile_pass()
        time.sleep(0.3)
    held = status_of(workload)
    assert held.status == "running" and run_deadline(held) is None
    assert UsageRecord.objects.get(workload=workload).started_at == workload.admitted_at  # not moved yet

    kueue_api.patch_namespaced_custom_object_status(group, version, namespace, plural, f"job-{job_name}", {
        "status": {"conditions": [condition("QuotaReserved", "True", "QuotaReserved"),
                                  condition("Admitted", "True", "Admitted")]}})
    real_kube.batch.patch_namespaced_job(job_name, namespace, {"spec": {"suspend": False}})
    assert eventually(lambda: CLOCK_AWAITS_PODS not in status_of(workload).runtime,
                      step=real_reconciler.reconcile_pass, timeout=WAIT), real_kube.describe(namespace)
    started = status_of(workload)
    pod = real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}")[0]
    assert abs((started.started_at - pod.status.container_statuses[0].state.running.started_at).total_seconds()) < 1.5
    assert started.started_at - workload.admitted_at >= timedelta(seconds=3)  # the 4 s hold is not run time
    assert run_deadline(started) == started.started_at + timedelta(seconds=600)
    assert UsageRecord.objects.get(workload=workload).started_at == started.started_at
