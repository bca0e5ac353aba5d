"""Notebooks on real nodes (issue 42, item 6), on the real control plane: kwok nodes in two zones,
a PersistentVolume pinned to a zone (or a host) by its node affinity, created by hand and pre-bound
to the notebook's home claim as a zonal provisioner would have bound it; kube-scheduler's volume
binding, the node lifecycle controller and the StatefulSet controller are the real ones.

- A notebook Cairn placed in the wrong zone (its home volume's affinity not known yet) goes back to
  the queue once, with the affinity recorded, and Cairn's scheduler starts it in the volume's zone.
- A notebook whose node is lost shows it at once (ContainersReady False, NodeLost); after the grace
  its pod is force-deleted and it starts again on another node of the volume's zone, with its claim.
- A notebook whose volume is pinned to the lost host is requeued with a reason that says so and
  waits: no other node may use its volume.
"""
import itertools
import time

import pytest

from apps.backends.kubernetes import manifests as m
from apps.backends.services import workload_dispatch
from apps.clusters.models import Node
from apps.scheduling import services as scheduling_services
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload, WorkloadEvent
from tests.factories import PoolFactory, QuotaFactory, WorkloadFactory

from .conftest import _node_object, eventually

WAIT = 60
ZONE = "topology.kubernetes.io/zone"
POOL_LABEL = "cairn.test/pool"
_suffixes = itertools.count(1)


def status_of(workload) -> Workload:
    return Workload.objects.select_related("pool__cluster", "project").get(pk=workload.pk)


def condition(workload, ctype) -> dict:
    return {c["type"]: c for c in status_of(workload).conditions}.get(ctype, {})


@pytest.fixture
def zones(real_kube, real_cluster, real_project):
    """Three CPU kwok nodes of a pool of their own: <tag>-a0 in zone-a, <tag>-b0 and <tag>-b1 in
    zone-b. Removed afterwards, with the volumes the test made."""
    tag = f"nbz-{next(_suffixes)}"
    names = {f"{tag}-a0": "zone-a", f"{tag}-b0": "zone-b", f"{tag}-b1": "zone-b"}
    for name, zone in names.items():
        node = _node_object({"name": name, "resource": None, "count": 0, "labels": {POOL_LABEL: tag, ZONE: zone}})
        for key in ("capacity", "allocatable"):
            node["status"][key].update({"cpu": "8", "memory": "32Gi"})
        real_kube.core.create_node(node)
    ready = lambda: all(any(c.type == "Ready" and c.status == "True"  # noqa: E731
                            for c in real_kube.core.read_node(n).status.conditions or []) for n in names)
    assert eventually(ready, timeout=WAIT), "kwok never readied the nodes"
    pool = PoolFactory(cluster=real_cluster, name=f"{tag}-pool", node_selector={POOL_LABEL: tag})
    QuotaFactory(project=real_project, pool=pool, nominal_gpu_milli=0, nominal_cpu_milli=64000,
                 nominal_memory_mb=256 * 1024)
    volumes: list[str] = []
    yield tag, pool, volumes
    for name in volumes:
        try:
            real_kube.core.delete_persistent_volume(name)
        except Exception:  # noqa: BLE001 - already gone
            pass
    for name in names:
        real_kube.core.delete_node(name)


def home_volume(real_kube, volumes: list, notebook, affinity: dict) -> str:
    """A PV pinned by `affinity` (one matchExpression), pre-bound to the notebook's home claim."""
    name = f"home-{notebook.project.slug}-{notebook.pk}"
    real_kube.core.create_persistent_volume({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/srv/homes/{notebook.pk}"},
                 "claimRef": {"namespace": f"cairn-{notebook.project.slug}", "name": m.home_claim_name(notebook.pk)},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}}}})
    volumes.append(name)
    return name


def live_pod(real_kube, notebook):
    pods = [p for p in real_kube.pods(f"cairn-{notebook.project.slug}", f"{m.LABEL_WORKLOAD}={notebook.pk}")
            if p.metadata.deletion_timestamp is None]
    return pods[0] if len(pods) == 1 and pods[0].status.phase == "Running" else None


def start(real_kube, reconciler, notebook, *, expect_node_in: set[str]):
    """Cairn's scheduler admits it, the dispatch launches it, kube-scheduler binds its pod."""
    # The scheduler reads again only queued rows whose xmin moved; inside the one transaction of a
    # test a row can come back to the queue with the xmin it was first read with (written at the
    # top level both times), which never happens across the transactions of a real deployment.
    scheduling_services._INPUTS.rows.clear()
    assert eventually(lambda: scheduling_cycle() and status_of(notebook).status == "admitted",
                      step=reconciler.reconcile_pass, timeout=WAIT), status_of(notebook).pending_reason
    placed = status_of(notebook).placement[0]["node"]
    assert placed in expect_node_in, (placed, status_of(notebook).node_affinity)
    assert eventually(lambda: workload_dispatch(workload_id=notebook.pk).status == "running",
                      step=reconciler.reconcile_pass, timeout=WAIT)
    pod = eventually(lambda: live_pod(real_kube, notebook), step=reconciler.reconcile_pass, timeout=WAIT)
    assert pod is not None and pod.spec.node_name == placed, real_kube.describe(f"cairn-{notebook.project.slug}")
    return pod


def notebook_in(real_project, pool):
    return WorkloadFactory(project=real_project, pool=pool, kind="notebook", replicas=1, gpu_milli=0,
                           cpu_milli=1000, memory_mb=1024, spec={"env": {}})


def lose(real_kube, node: str) -> None:
    """kwok stops being the node's kubelet; its Ready condition goes Unknown (as the node
    lifecycle controller sets it when heartbeats stop), two minutes ago."""
    from .controlplane import KWOK_NODE_ANNOTATION

    real_kube.core.patch_node(node, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: "lost"}}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 120))
    real_kube.core.patch_node_status(node, {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting",
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}})


def test_a_notebook_placed_outside_its_home_volumes_zone_starts_again_inside_it(
        real_kube, real_project, start_real_reconciler, zones):
    tag, pool, volumes = zones
    reconciler = start_real_reconciler()
    assert eventually(lambda: Node.objects.filter(pool=pool).count() == 3, step=reconciler.reconcile_pass,
                      timeout=WAIT)
    notebook = notebook_in(real_project, pool)
    home_volume(real_kube, volumes, notebook, {"key": ZONE, "operator": "In", "values": ["zone-b"]})
    # Cairn does not know the volume yet: it placed the notebook in zone-a (as before this fix,
    # when its pod stayed Pending on a volume node affinity conflict).
    Workload.objects.filter(pk=notebook.pk).update(status="admitted", placement=[
        {"replica": 0, "node": f"{tag}-a0", "gpus": []}])
    assert workload_dispatch(workload_id=notebook.pk).status == "running"
    assert eventually(lambda: status_of(notebook).status == "queued", step=reconciler.reconcile_pass,
                      timeout=WAIT), real_kube.describe(f"cairn-{real_project.slug}")
    requeued = status_of(notebook)
    assert requeued.status_reason == "VolumeTopology", requeued.status_message
    assert f"{ZONE} in (zone-b)" in requeued.status_message and f"{tag}-a0" in requeued.status_message
    assert requeued.node_affinity == [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]
    # Cairn's scheduler now places it in zone-b only; kube-scheduler binds it there with its claim.
    start(real_kube, reconciler, notebook, expect_node_in={f"{tag}-b0", f"{tag}-b1"})
    claim = real_kube.core.read_namespaced_persistent_volume_claim(m.home_claim_name(notebook.pk),
                                                                   f"cairn-{real_project.slug}")
    assert claim.spec.volume_name == volumes[0]


def test_a_notebook_on_a_lost_node_shows_it_then_starts_again_in_its_zone(
        real_kube, real_project, start_real_reconciler, zones, settings):
    tag, pool, volumes = zones
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "NODE_LOST_GRACE_SECONDS": 600}
    reconciler = start_real_reconciler()
    assert eventually(lambda: Node.objects.filter(pool=pool).count() == 3, step=reconciler.reconcile_pass,
                      timeout=WAIT)
    notebook = notebook_in(real_project, pool)
    home_volume(real_kube, volumes, notebook, {"key": ZONE, "operator": "In", "values": ["zone-b"]})
    # b0 only, for its first start (the others are cordoned by Cairn meanwhile: the volume's
    # affinity is not known before the first start, the test above covers that)
    others = Node.objects.filter(name__in=[f"{tag}-a0", f"{tag}-b1"])
    others.update(schedulable=False, cordon_reason="test")
    pod = start(real_kube, reconciler, notebook, expect_node_in={f"{tag}-b0"})
    # recorded from the bound claim's volume once the pod is on its node
    assert eventually(lambda: status_of(notebook).node_affinity, step=reconciler.reconcile_pass, timeout=WAIT)
    others.update(schedulable=True, cordon_reason="")
    node = pod.spec.node_name
    lose(real_kube, node)
    # within the grace: not healthy, and says why (it used to look healthy, Terminating for ever)
    assert eventually(lambda: condition(notebook, "ContainersReady").get("reason") == "NodeLost",
                      step=reconciler.reconcile_pass, timeout=WAIT), status_of(notebook).conditions
    lost = condition(notebook, "ContainersReady")
    assert lost["status"] == "False" and node in lost["message"], lost
    assert status_of(notebook).status == "running"
    assert WorkloadEvent.objects.filter(workload=notebook, reason="NodeLost").exists()
    # the grace passes: requeued, the pod on the lost node force-deleted
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "NODE_LOST_GRACE_SECONDS": 1}
    assert eventually(lambda: status_of(notebook).status == "queued", step=reconciler.reconcile_pass,
                      timeout=WAIT), status_of(notebook).conditions
    requeued = status_of(notebook)
    assert requeued.status_reason == "NodeLost" and "requeued to start on another node" in requeued.status_message
    assert eventually(lambda: all(p.spec.node_name != node for p in real_kube.pods(
        f"cairn-{real_project.slug}", f"{m.LABEL_WORKLOAD}={notebook.pk}")), timeout=WAIT)
    assert eventually(lambda: Node.objects.get(name=node).health == "unhealthy", step=reconciler.reconcile_pass,
                      timeout=WAIT)
    # not zone-a (its volume), not the lost node: b1, with the same claim
    again = start(real_kube, reconciler, notebook, expect_node_in={f"{tag}-b1"})
    assert again.spec.node_name == f"{tag}-b1"
    assert {v.persistent_volume_claim.claim_name for v in again.spec.volumes if v.persistent_volume_claim} == {
        m.home_claim_name(notebook.pk)}


def test_a_notebook_whose_volume_is_on_the_lost_host_waits_saying_so(
        real_kube, real_project, start_real_reconciler, zones, settings):
    tag, pool, volumes = zones
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "NODE_LOST_GRACE_SECONDS": 1}
    reconciler = start_real_reconciler()
    assert eventually(lambda: Node.objects.filter(pool=pool).count() == 3, step=reconciler.reconcile_pass,
                      timeout=WAIT)
    notebook = notebook_in(real_project, pool)
    host = f"{tag}-b1"
    home_volume(real_kube, volumes, notebook, {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]})
    Workload.objects.filter(pk=notebook.pk).update(status="admitted", placement=[
        {"replica": 0, "node": host, "gpus": []}])
    assert workload_dispatch(workload_id=notebook.pk).status == "running"
    pod = eventually(lambda: live_pod(real_kube, notebook), step=reconciler.reconcile_pass, timeout=WAIT)
    assert pod is not None and pod.spec.node_name == host, real_kube.describe(f"cairn-{real_project.slug}")
    assert eventually(lambda: status_of(notebook).node_affinity, step=reconciler.reconcile_pass, timeout=WAIT)
    lose(real_kube, host)
    assert eventually(lambda: status_of(notebook).status == "queued", step=reconciler.reconcile_pass,
                      timeout=WAIT), status_of(notebook).conditions
    requeued = status_of(notebook)
    assert requeued.status_reason == "NodeLost"
    assert f"kubernetes.io/hostname in ({host})" in requeued.status_message
    assert "no other Ready node" in requeued.status_message, requeued.status_message
    assert eventually(lambda: Node.objects.get(name=host).health == "unhealthy", step=reconciler.reconcile_pass,
                      timeout=WAIT)
    scheduling_cycle()
    waiting = status_of(notebook)
    assert waiting.status == "queued" and waiting.waiting_on == "constraint", waiting.pending_reason
    assert f"kubernetes.io/hostname in ({host})" in waiting.pending_reason
