"""Dispatch through the real client against the emulated API server: objects created with the
right names and labels, idempotent on redelivery (409 -> adopt), a clear error for an object that
is not ours, retries with backoff on 5xx and timeouts, stop by deletion or scale to zero."""
import pytest

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.backends.tasks import workload_dispatch_task
from apps.notebooks.access import runtime_token
from apps.workloads.models import Workload

from .conftest import eventually

NS = "cairn-vision"


def reload(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


@pytest.mark.real_kube
def test_training_dispatch_creates_namespace_headless_service_and_indexed_job(emulator, make_workload):
    workload = make_workload(replicas=2, gpu_milli=1000)
    done = workload_dispatch(workload_id=workload.pk)
    assert done.status == "running"
    ns = emulator.get("namespaces", "", NS)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    job = emulator.get("jobs", NS, f"cairn-{workload.pk}-1")
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    assert job["metadata"]["labels"]["cairn.dev/workload"] == str(workload.pk)
    assert job["metadata"]["labels"]["cairn.dev/project"] == "vision"
    assert emulator.get("services", NS, f"cairn-{workload.pk}")["spec"]["clusterIP"] == "None"
    run_secret = emulator.get("secrets", NS, f"cairn-{workload.pk}-1-run")["stringData"]
    assert run_secret["CAIRN_RUN_TOKEN"] and run_secret["CAIRN_RUN_ID"]
    runtime = reload(workload).runtime
    assert runtime["job"] == f"cairn-{workload.pk}-1" and runtime["namespace"] == NS
    assert all(o["outcome"] == "created" for o in runtime["objects"])


@pytest.mark.real_kube
def test_notebook_and_deployment_dispatch_create_their_objects(emulator, make_workload):
    notebook = make_workload(kind="notebook", spec={"env": {}})
    deployment = make_workload(kind="deployment", replicas=2, spec={"command": ["serve"], "port": 9000, "env": {}})
    workload_dispatch(workload_id=notebook.pk)
    workload_dispatch(workload_id=deployment.pk)
    n, d = notebook.pk, deployment.pk
    assert emulator.get("statefulsets", NS, f"cairn-{n}")["spec"]["replicas"] == 1
    assert emulator.get("persistentvolumeclaims", NS, f"cairn-{n}-home") is not None
    assert emulator.get("secrets", NS, f"cairn-{n}")["stringData"]["token"] == runtime_token(reload(notebook))
    assert reload(notebook).runtime["token"].startswith("fernet:")  # encrypted at rest (issue 44)
    assert emulator.get("deployments", NS, f"cairn-{d}")["spec"]["replicas"] == 2
    assert emulator.get("horizontalpodautoscalers", NS, f"cairn-{d}") is None  # Cairn's autoscaler, no HPA
    assert reload(deployment).status == reload(notebook).status == "running"


@pytest.mark.real_kube
def test_volcano_cluster_gets_a_podgroup(emulator, make_workload, k8s_cluster):
    k8s_cluster.config = {"volcano": True}
    k8s_cluster.save(update_fields=["config"])
    workload = make_workload(replicas=3)
    workload_dispatch(workload_id=workload.pk)
    assert emulator.get("podgroups", NS, f"cairn-{workload.pk}-1")["spec"]["minMember"] == 3


@pytest.mark.real_kube
def test_dispatch_task_delivered_three_times_creates_exactly_one_job(emulator, make_workload):
    """The first delivery's process died after creating the objects but before committing
    (simulated by launching directly); three deliveries follow. One Job, adopted, RUNNING."""
    workload = make_workload(replicas=2)
    KubernetesBackend().launch(reload(workload), attempt=1)  # the crashed delivery's work
    for _ in range(3):
        workload_dispatch_task.apply(args=[workload.pk])
    assert len(emulator.list("jobs", NS)) == 1
    assert emulator.creates("jobs") == 2  # the crashed one, then one 409 answered by adoption
    workload = reload(workload)
    assert workload.status == "running" and workload.attempt == 1
    assert {o["kind"]: o["outcome"] for o in workload.runtime["objects"]}["Job"] == "adopted"


def test_existing_object_with_foreign_labels_is_not_adopted(emulator, make_workload):
    """Emulator only: it plants a bare Job (no pod template) that a real server refuses."""
    workload = make_workload()
    emulator.create("namespaces", {"metadata": {"name": NS}})
    emulator.create("jobs", {"metadata": {"name": f"cairn-{workload.pk}-1", "namespace": NS,
                                          "labels": {"team": "someone-else"}}, "spec": {}})
    done = workload_dispatch(workload_id=workload.pk)
    assert done.status == "failed" and done.status_reason == "LaunchFailed"
    assert "already exists and does not belong to this workload" in done.status_message


def test_server_errors_are_retried_with_backoff(emulator, make_workload):
    """Emulator only: a real server's 5xx cannot be injected on demand."""
    workload = make_workload()
    emulator.fail("POST", "/jobs", 500, times=2)  # within the client's 2 retries
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    assert len(emulator.list("jobs", NS)) == 1


def test_timeouts_are_retried_and_a_create_that_landed_is_adopted(emulator, make_workload):
    """Emulator only: a request stalled on demand. The first POST of the Job outlives the
    client's timeout but still lands on the server;
    the retry gets 409 (or creates it first) — either way one Job and a RUNNING workload."""
    workload = make_workload()
    emulator.stall("POST", "/jobs", 1.5)
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    import time

    time.sleep(0.6)  # let the stalled request finish on the server
    assert len(emulator.list("jobs", NS)) == 1


def test_persistent_server_errors_leave_the_workload_admitted_and_the_task_retries(emulator, make_workload):
    """Emulator only: a real server's 5xx cannot be injected on demand."""
    workload = make_workload()
    emulator.fail("POST", "/jobs", 503, times=4)  # more than one delivery's 3 tries
    result = workload_dispatch_task.apply(args=[workload.pk])  # Celery retries it (eagerly here)
    assert result.successful(), result.traceback
    assert reload(workload).status == "running"
    assert len(emulator.list("jobs", NS)) == 1


def test_client_errors_fail_the_workload_with_the_servers_reason(emulator, make_workload):
    """Emulator only: a 403 injected on one request (RBAC would refuse them all)."""
    workload = make_workload()
    emulator.fail("POST", "/jobs", 403)
    done = workload_dispatch(workload_id=workload.pk)
    assert done.status == "failed"
    assert "403" in done.status_message


def test_unreachable_cluster_keeps_the_workload_admitted(emulator, make_workload):
    """Emulator only: the session's real API server is not stopped mid-run."""
    workload = make_workload()
    emulator.stop()
    with pytest.raises(Exception) as raised:
        workload_dispatch(workload_id=workload.pk)
    assert type(raised.value).__name__ == "TransientError"
    assert reload(workload).status == "admitted"


@pytest.mark.real_kube
def test_stop_training_deletes_the_job_with_its_pods(emulator, make_workload, kubelet):
    workload = make_workload(replicas=2)
    workload_dispatch(workload_id=workload.pk)
    pods = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-1")
    for pod in pods:
        kubelet.running(NS, pod)
    from apps.workloads.services import workload_stop

    workload_stop(workload=reload(workload))
    assert workload_stop_signal(workload_id=workload.pk) == 2
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None
    # propagated to the pods: a real garbage collector deletes them shortly after, not at once
    assert eventually(lambda: emulator.list("pods", NS) == [], timeout=30)


@pytest.mark.real_kube
def test_stop_notebook_and_deployment_scales_to_zero(emulator, make_workload):
    from apps.workloads.services import workload_stop

    notebook = make_workload(kind="notebook", spec={"env": {}})
    deployment = make_workload(kind="deployment", spec={"command": ["serve"], "port": 8000, "env": {}})
    for w in (notebook, deployment):
        workload_dispatch(workload_id=w.pk)
        workload_stop(workload=reload(w))
        workload_stop_signal(workload_id=w.pk)
    assert emulator.get("statefulsets", NS, f"cairn-{notebook.pk}")["spec"]["replicas"] == 0
    assert emulator.get("deployments", NS, f"cairn-{deployment.pk}")["spec"]["replicas"] == 0
    assert emulator.get("persistentvolumeclaims", NS, f"cairn-{notebook.pk}-home") is not None  # home kept


def test_logs_come_from_the_replicas_pod(emulator, make_workload, kubelet):
    """Emulator only: log content needs a kubelet."""
    workload = make_workload(replicas=2)
    workload_dispatch(workload_id=workload.pk)
    pods = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-1")
    emulator.logs[(NS, pods[1])] = "epoch 1 loss 0.5\n"
    backend = KubernetesBackend()
    assert backend.logs(reload(workload), replica=1, attempt=1) == "epoch 1 loss 0.5\n"
    assert backend.logs(reload(workload), replica=5, attempt=1) == ""


@pytest.mark.real_kube
@pytest.mark.django_db(transaction=True)
def test_three_concurrent_deliveries_create_exactly_one_job(emulator, make_workload):
    """Three workers take the same dispatch message at once: the row lock serialises them."""
    import threading

    from django.db import connection

    workload = make_workload(replicas=2)
    errors = []

    def deliver():
        try:
            workload_dispatch_task.apply(args=[workload.pk])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not errors
    assert len(emulator.list("jobs", NS)) == 1 and emulator.creates("jobs") == 1
    workload = reload(workload)
    assert workload.status == "running" and workload.attempt == 1
