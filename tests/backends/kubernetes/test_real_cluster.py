"""Cairn against a real control plane (etcd, kube-apiserver with RBAC and Pod Security,
kube-controller-manager, kube-scheduler; kwok for nodes and container runtimes): registered with
the ServiceAccount token platform/kubernetes/rbac.yaml binds, a training job goes from dispatch to
Job, pods created by the real job controller, bound by the real scheduler, run by kwok, and
observed by Cairn's reconciler through list + watch."""
from apps.backends.kubernetes import manifests as m
from apps.backends.services import workload_dispatch
from apps.clusters.models import Node
from apps.clusters.services import kubernetes_cluster_check
from apps.workloads.models import Workload

from .conftest import REAL_NODES, eventually


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def condition(workload, ctype) -> dict:
    return {c["type"]: c for c in status_of(workload).conditions}.get(ctype, {})


def namespace_of(workload) -> str:
    return f"cairn-{workload.project.slug}"


def test_registration_with_the_service_account_token_reaches_the_api_server(real_cluster):
    credential = kubernetes_cluster_check(cluster=real_cluster)
    assert credential.check_ok, credential.check_detail
    assert "Kubernetes v1." in credential.check_detail


def test_training_job_runs_through_the_real_job_controller_scheduler_and_kwok(real_kube, real_reconciler,
                                                                             make_real_workload):
    workload = make_real_workload(replicas=2, gpu_milli=1000)
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    ns, job_name = namespace_of(workload), f"cairn-{workload.pk}-1"
    job = real_kube.batch.read_namespaced_job(job_name, ns)
    assert job.spec.completion_mode == "Indexed" and job.spec.completions == 2

    def running_pods():
        pods = real_kube.pods(ns, f"{m.LABEL_WORKLOAD}={workload.pk}")
        return pods if len(pods) == 2 and all(p.status.phase == "Running" for p in pods) else None

    pods = eventually(running_pods, timeout=60)
    assert pods, real_kube.describe(ns)
    # the real scheduler placed them on GPU nodes (tainted: Cairn's toleration let them in)
    gpu_nodes = {n["name"] for n in REAL_NODES if n["resource"] == "nvidia.com/gpu"}
    assert {p.spec.node_name for p in pods} <= gpu_nodes
    assert all(p.metadata.owner_references[0].kind == "Job" for p in pods)

    until = lambda check: eventually(check, step=real_reconciler.reconcile_pass, timeout=30)  # noqa: E731
    assert until(lambda: condition(workload, "ContainersReady").get("status") == "True"), (
        status_of(workload).conditions, real_kube.describe(ns))
    assert status_of(workload).status == "running"

    for pod in pods:
        real_kube.exit(ns, pod.metadata.name, 0)
    assert until(lambda: status_of(workload).status == "succeeded"), (
        status_of(workload).status_message, real_kube.describe(ns))
    assert status_of(workload).exit_code == 0
    complete = lambda: any(c.type == "Complete" and c.status == "True"  # noqa: E731
                           for c in real_kube.batch.read_namespaced_job(job_name, ns).status.conditions or [])
    assert eventually(complete, timeout=30), real_kube.describe(ns)


def test_a_failed_replica_fails_the_workload_with_its_exit_code(real_kube, real_reconciler, make_real_workload):
    workload = make_real_workload(replicas=2, gpu_milli=1000)
    workload_dispatch(workload_id=workload.pk)
    ns = namespace_of(workload)
    running = lambda: [p for p in real_kube.pods(ns, f"{m.LABEL_WORKLOAD}={workload.pk}")  # noqa: E731
                       if p.status.phase == "Running"]
    assert eventually(lambda: len(running()) == 2, timeout=60), real_kube.describe(ns)
    pod = next(p for p in running() if p.metadata.labels.get(m.COMPLETION_INDEX_ANNOTATION) == "1")
    real_kube.exit(ns, pod.metadata.name, 3)
    assert eventually(lambda: status_of(workload).status == "failed", step=real_reconciler.reconcile_pass,
                      timeout=30), (status_of(workload).status, real_kube.describe(ns))
    workload = status_of(workload)
    assert workload.exit_code == 3 and workload.status_reason == "ReplicaFailed", workload.status_message


def test_the_fake_nodes_become_cairns_node_inventory(real_kube, real_reconciler, real_pool):
    assert eventually(lambda: Node.objects.filter(cluster=real_pool.cluster).count() == len(REAL_NODES),
                      step=real_reconciler.reconcile_pass, timeout=30)
    h100 = Node.objects.get(cluster=real_pool.cluster, name="h100-0")
    assert (h100.gpu_count, h100.gpu_model) == (8, "NVIDIA-H100-80GB-HBM3")
    assert h100.health == "healthy" and h100.schedulable is True


def test_a_replica_no_node_can_hold_shows_kube_schedulers_reason(real_kube, real_reconciler, make_real_workload):
    """16 GPUs in one pod: no fake node has more than 8, so kube-scheduler itself refuses it and
    records FailedScheduling (core/v1 event with its reasons); Cairn's condition quotes it."""
    workload = make_real_workload(replicas=1, gpu_milli=16000)
    workload_dispatch(workload_id=workload.pk)
    ns = namespace_of(workload)
    scheduled = lambda: condition(workload, "PodScheduled")  # noqa: E731
    assert eventually(lambda: "Insufficient nvidia.com/gpu" in scheduled().get("message", ""),
                      step=real_reconciler.reconcile_pass, timeout=60), (scheduled(), real_kube.describe(ns))
    assert scheduled()["status"] == "False" and scheduled()["reason"] == "Unschedulable"
    assert scheduled()["message"].startswith("Replica 0 cannot be scheduled: 0/5 nodes are available")
    assert status_of(workload).status == "running"  # waiting for capacity, not failed


def test_amd_and_ascend_workloads_land_on_their_vendors_nodes(real_kube, real_reconciler, make_real_workload):
    """docs/accelerators.md: the vendor's resource (amd.com/gpu, huawei.com/Ascend910) and its
    taint's toleration; kube-scheduler can only place each on the one node that has it."""
    expected = {"amd": "mi300-0", "ascend": "ascend-0"}
    workloads = {vendor: make_real_workload(replicas=1, gpu_milli=2000, accelerator_type=vendor)
                 for vendor in expected}
    for workload in workloads.values():
        assert workload_dispatch(workload_id=workload.pk).status == "running", status_of(workload).status_message
    ns = namespace_of(next(iter(workloads.values())))
    for vendor, workload in workloads.items():
        running = lambda w=workload: [p for p in real_kube.pods(ns, f"{m.LABEL_WORKLOAD}={w.pk}")  # noqa: E731
                                      if p.status.phase == "Running"]
        assert eventually(running, timeout=60), real_kube.describe(ns)
        assert running()[0].spec.node_name == expected[vendor]
        assert eventually(lambda w=workload: condition(w, "ContainersReady").get("status") == "True",
                          step=real_reconciler.reconcile_pass, timeout=30), status_of(workload).conditions
