"""Capacity that counts others (issue 42, Found 3), on the real control plane: a kwok node whose
DaemonSet pod (run by the real DaemonSet controller) and another tenant's pod (bound by the real
kube-scheduler) hold part of it. Cairn's reconciler counts their requests on the node, Cairn's
scheduler places only in what they leave, and what it places kube-scheduler binds there."""
import itertools

import pytest
from kubernetes import client as k8s

from apps.backends.kubernetes import manifests as m
from apps.backends.services import workload_dispatch
from apps.clusters.models import Node
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload
from tests.factories import PoolFactory, QuotaFactory, WorkloadFactory

from .conftest import _node_object, eventually

POOL_LABEL = "cairn.test/pool"
_suffixes = itertools.count(1)
WAIT = 60


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def add_kwok_node(real_kube, name: str, *, gpus: int, cpu: str, memory: str, labels: dict) -> None:
    node = _node_object({"name": name, "resource": "nvidia.com/gpu", "count": gpus, "labels": {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559", **labels}})
    for key in ("capacity", "allocatable"):
        node["status"][key].update({"cpu": cpu, "memory": memory})
    real_kube.core.create_node(node)
    ready = lambda: any(c.type == "Ready" and c.status == "True"  # noqa: E731
                        for c in real_kube.core.read_node(name).status.conditions or [])
    assert eventually(ready, timeout=WAIT), f"kwok never readied node {name}"


def ensure_namespace(real_kube, name: str) -> None:
    try:
        real_kube.core.create_namespace({"metadata": {"name": name}})
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise


def running_on(real_kube, namespace: str, selector: str, node: str) -> list:
    pods = [p for p in real_kube.pods(namespace, selector) if not p.metadata.deletion_timestamp]
    return pods if pods and all(p.status.phase == "Running" and p.spec.node_name == node for p in pods) else []


@pytest.fixture
def tenants(real_kube):
    """A kwok node of its own (8 GPUs, 16 CPUs, 64 GiB) in a pool of its own, and the namespaces
    of a DaemonSet and of another tenant; all removed afterwards."""
    suffix = next(_suffixes)
    node, ops, tenant = f"shared-{suffix}", f"ops-{suffix}", f"tenant-{suffix}"
    add_kwok_node(real_kube, node, gpus=8, cpu="16", memory="64Gi", labels={POOL_LABEL: node})
    for namespace in (ops, tenant):
        ensure_namespace(real_kube, namespace)
    yield node, ops, tenant
    for namespace in (ops, tenant):
        real_kube.core.delete_namespace(namespace)
    real_kube.core.delete_node(node)


def test_cairn_places_only_what_daemonsets_and_other_tenants_leave(
        real_kube, real_cluster, real_project, start_real_reconciler, tenants):
    node, ops, tenant = tenants
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # A DaemonSet (say an exporter) asking 4 CPUs and 8 GiB on every node of the pool ...
    k8s.AppsV1Api(real_kube.api).create_namespaced_daemon_set(ops, {
        "metadata": {"name": "exporter"},
        "spec": {"selector": {"matchLabels": {"app": "exporter"}}, "template": {
            "metadata": {"labels": {"app": "exporter"}},
            "spec": {"nodeSelector": {POOL_LABEL: node}, "tolerations": toleration, "containers": [{
                "name": "exporter", "image": "exporter:1",
                "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}}}})
    # ... and another tenant's pod holding 6 of the node's 8 GPUs (kube-scheduler binds it).
    real_kube.core.create_namespaced_pod(tenant, {
        "metadata": {"name": "their-job", "labels": {"app": "theirs"}},
        "spec": {"nodeSelector": {POOL_LABEL: node}, "tolerations": toleration, "containers": [{
            "name": "main", "image": "theirs:1",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"nvidia.com/gpu": "6"}}}]}})
    assert eventually(lambda: running_on(real_kube, ops, "app=exporter", node), timeout=WAIT), real_kube.describe(ops)
    assert eventually(lambda: running_on(real_kube, tenant, "app=theirs", node), timeout=WAIT), \
        real_kube.describe(tenant)

    pool = PoolFactory(cluster=real_cluster, name="shared-pool", node_selector={POOL_LABEL: node})
    QuotaFactory(project=real_project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=16000,
                 nominal_memory_mb=65536)
    reconciler = start_real_reconciler()
    held = lambda: Node.objects.filter(name=node, pool=pool).values_list(  # noqa: E731
        "others_gpu_milli", "others_cpu_milli", "others_memory_mb").first()
    assert eventually(lambda: held() == (6000, 6000, 12 * 1024), step=reconciler.reconcile_pass, timeout=WAIT), held()

    def job(name, *, gpus, cpu):
        return WorkloadFactory(project=real_project, pool=pool, name=name, gpu_milli=gpus * 1000, cpu_milli=cpu * 1000,
                               memory_mb=1024, spec={"command": ["train"], "env": {}})

    small = job("small", gpus=2, cpu=2)  # fits in what is left: 2 GPUs, 10 CPUs
    assert scheduling_cycle().admitted == 1 and status_of(small).status == "admitted"
    assert workload_dispatch(workload_id=small.pk).status == "running"
    namespace = f"cairn-{real_project.slug}"
    # kube-scheduler agrees: it binds Cairn's pod on that node beside the others' pods
    assert eventually(lambda: running_on(real_kube, namespace, f"{m.LABEL_WORKLOAD}={small.pk}", node),
                      step=reconciler.reconcile_pass, timeout=WAIT), real_kube.describe(namespace)

    # Without the others counted both would fit (8 GPUs, 16 CPUs less `small`'s 2 and 2): they wait.
    gpu_heavy, cpu_heavy = job("gpu-heavy", gpus=4, cpu=1), job("cpu-heavy", gpus=0, cpu=11)
    result = scheduling_cycle()
    assert result.admitted == 0, [(w.name, w.status) for w in Workload.objects.filter(pool=pool)]
    for waiting in (gpu_heavy, cpu_heavy):
        assert status_of(waiting).status == "queued" and status_of(waiting).pending_reason, status_of(waiting)

    # The other tenant's job ends: its 6 GPUs (and 2 CPUs) are Cairn's to place again.
    real_kube.core.delete_namespaced_pod("their-job", tenant, grace_period_seconds=0)
    assert eventually(lambda: held() == (0, 4000, 8 * 1024), step=reconciler.reconcile_pass, timeout=WAIT), held()
    scheduling_cycle()
    assert status_of(gpu_heavy).status == "admitted", status_of(gpu_heavy).pending_reason
    assert status_of(cpu_heavy).status == "queued"  # 16 CPUs - 4 (DaemonSet) - 2 (small) - 1 (gpu-heavy) < 11
    assert workload_dispatch(workload_id=gpu_heavy.pk).status == "running"
    assert eventually(lambda: running_on(real_kube, namespace, f"{m.LABEL_WORKLOAD}={gpu_heavy.pk}", node),
                      step=reconciler.reconcile_pass, timeout=WAIT), real_kube.describe(namespace)


# -- per-replica placement and the pending timeout ----------------------------------------------

def test_a_gated_multi_replica_job_lands_on_exactly_cairns_nodes(real_kube, real_reconciler, make_real_workload):
    """Each replica where Cairn's scheduler put it (crossed on purpose: rank 0 on h100-1, rank 1
    on h100-0), not merely somewhere in the set: the pods are created gated, Cairn sets each one's
    kubernetes.io/hostname while gated and removes the gate, kube-scheduler binds."""
    placement = [{"replica": 0, "node": "h100-1", "gpus": [0]}, {"replica": 1, "node": "h100-0", "gpus": [0]}]
    workload = make_real_workload(replicas=2, gpu_milli=1000, placement=placement)
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, job_name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}-1"
    template = real_kube.batch.read_namespaced_job(job_name, namespace).spec.template
    assert [g.name for g in template.spec.scheduling_gates] == [m.PLACEMENT_GATE]
    assert template.metadata.annotations[m.PLACEMENT_ANNOTATION] == "0=h100-1,1=h100-0"
    assert not template.spec.affinity  # no `hostname In [...]` set any more

    def placed():
        pods = [p for p in real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}") if p.status.phase == "Running"]
        return {int(p.metadata.labels[m.COMPLETION_INDEX_ANNOTATION]): p for p in pods} if len(pods) == 2 else None

    pods = eventually(placed, step=real_reconciler.reconcile_pass, timeout=WAIT)
    assert pods, real_kube.describe(namespace)
    assert {i: p.spec.node_name for i, p in pods.items()} == {0: "h100-1", 1: "h100-0"}
    assert all(not p.spec.scheduling_gates and p.spec.node_selector[m.HOSTNAME_LABEL] == p.spec.node_name
               for p in pods.values())


def test_a_replica_no_node_takes_is_requeued_after_the_pools_pending_timeout(
        real_kube, real_reconciler, make_real_workload, real_pool):
    """Cairn's books said it fits, the node says no (here: a GPU replica placed on the CPU node):
    after the pool's pending timeout the workload is QUEUED again with reason PendingTimeout, its
    placement (quota) released and its Job deleted, no restart spent."""
    real_pool.pending_timeout_seconds = 3
    real_pool.save(update_fields=["pending_timeout_seconds"])
    workload = make_real_workload(replicas=1, gpu_milli=1000, max_restarts=0,
                                  placement=[{"replica": 0, "node": "cpu-0", "gpus": [0]}])
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, job_name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}-1"
    assert eventually(lambda: status_of(workload).status == "queued", step=real_reconciler.reconcile_pass,
                      timeout=WAIT), (status_of(workload).conditions, real_kube.describe(namespace))
    requeued = status_of(workload)
    assert requeued.status_reason == "PendingTimeout" and requeued.placement == []
    assert "requeued" in requeued.status_message and "without spending a restart" in requeued.status_message
    gone = lambda: not [j for j in real_kube.batch.list_namespaced_job(namespace).items  # noqa: E731
                        if j.metadata.name == job_name and not j.metadata.deletion_timestamp]
    assert eventually(gone, timeout=WAIT), real_kube.describe(namespace)
    # a free attempt: with max_restarts 0 the next admission may still run it
    from apps.workloads.lifecycle import FREE_REQUEUES
    assert requeued.events.filter(reason__in=FREE_REQUEUES, to_status="queued").count() == 1


# -- deployments' disruption budget --------------------------------------------------------------

def test_a_deployment_gets_a_disruption_budget_the_eviction_api_enforces(real_kube, real_reconciler,
                                                                         make_real_workload):
    """A drain evicts through the Eviction API: with two replicas and the budget's maxUnavailable 1
    (the rolling update's), the real disruption controller lets one pod go and refuses the next.

    As a drain does, the nodes are cordoned first: else the evicted pod's replacement may run and
    turn ready before the second eviction, and the budget rightly allows one more."""
    workload = make_real_workload(kind="deployment", replicas=2, gpu_milli=0, cpu_milli=100, memory_mb=64,
                                  spec={"command": ["serve"], "port": 8000, "env": {}})
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace, name = f"cairn-{workload.project.slug}", f"cairn-{workload.pk}"
    selector = {m.LABEL_WORKLOAD: str(workload.pk)}
    policy, apps = k8s.PolicyV1Api(real_kube.api), k8s.AppsV1Api(real_kube.api)
    budget = policy.read_namespaced_pod_disruption_budget(name, namespace)
    assert budget.spec.max_unavailable == 1 and budget.spec.min_available is None
    assert budget.spec.selector.match_labels == selector
    assert apps.read_namespaced_deployment(name, namespace).spec.selector.match_labels == selector

    def live_pods() -> list:
        return [p for p in real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}")
                if not p.metadata.deletion_timestamp]

    def settled() -> bool:
        """The rollout done, both pods ready, and the disruption controller's status computed
        from them (it answers nothing, or 0, until it found the pods' controller)."""
        deployment = apps.read_namespaced_deployment(name, namespace)
        d = deployment.status
        if (d.observed_generation or 0) < deployment.metadata.generation or not (
                d.replicas == d.updated_replicas == d.ready_replicas == 2):
            return False
        pods = live_pods()
        if len(pods) != 2 or not all(p.status.phase == "Running" and any(
                c.type == "Ready" and c.status == "True" for c in p.status.conditions or []) for p in pods):
            return False
        pdb = policy.read_namespaced_pod_disruption_budget(name, namespace)
        s = pdb.status
        return ((s.observed_generation or 0) >= pdb.metadata.generation and s.expected_pods == 2
                and s.current_healthy == 2 and s.desired_healthy == 1 and s.disruptions_allowed == 1)

    assert eventually(settled, timeout=WAIT), real_kube.describe(namespace)
    pods = [p.metadata.name for p in live_pods()]

    def evict(pod):
        real_kube.core.create_namespaced_pod_eviction(pod, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})

    cordoned = [n.metadata.name for n in real_kube.core.list_node().items if not n.spec.unschedulable]
    try:
        for node in cordoned:
            real_kube.core.patch_node(node, {"spec": {"unschedulable": True}})
        evict(pods[0])
        with pytest.raises(k8s.ApiException) as refused:
            evict(pods[1])
        assert refused.value.status == 429 and "disruption budget" in refused.value.body
    finally:
        for node in cordoned:
            real_kube.core.patch_node(node, {"spec": {"unschedulable": False}})
