"""Notebooks on real nodes: where the home claim lets them run, and what happens when their node
is lost (issue 42, item 6). Called by the reconciler for every running notebook (`notebook_check`).

**Volume topology.** A notebook's home claim (`cairn-<id>-home`, ReadWriteOnce) is bound, at its
first start, to a PersistentVolume that a zonal or local provisioner pins with a node affinity
(`topology.kubernetes.io/zone In [...]`, or one host). Before the first bind nothing pins it: with
a WaitForFirstConsumer class the claim follows the node Cairn chose. Once the notebook's pod is
on a node, the reconciler reads the claim's PV once (`home_topology`) and records its node
affinity on the workload (`Workload.node_affinity`); the scheduler then places the notebook only
on nodes that match it (apps/scheduling/policy/pinning.py) when it is started again or moved. A
notebook Cairn placed elsewhere before it knew (its pod Pending on a volume node affinity
conflict) is sent back to the queue once, with the affinity recorded.

**A lost node.** A notebook's pod whose node is not Ready (Ready False or Unknown: the kubelet
stopped reporting) shows it at once: condition ContainersReady False, reason NodeLost (it used to
look healthy, its pod Terminating for ever after the taint eviction). After NODE_LOST_GRACE_SECONDS
the notebook goes back to the queue (reason NodeLost, no restart spent, quota released), its
StatefulSet scaled to zero and its pod on the lost node force-deleted (grace 0: no kubelet will
ever confirm the deletion, and the StatefulSet makes no new pod while the old name exists). The
scheduler then starts it where its home claim allows: anywhere when the volume is not pinned
(ReadWriteMany, network storage), in the volume's zone otherwise, and it waits with a reason that
names the volume's affinity when no Ready node matches (a local volume on the lost host).
"""
from __future__ import annotations

import logging
import time

from django.utils import timezone

from apps.clusters.affinity import describe_terms, node_matches, terms_of
from apps.clusters.models import Node
from apps.workloads.choices import EventType
from apps.workloads.deadlines import format_duration
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record

from . import manifests as m
from .backend import is_alive, namespace_of
from .client import ApiError, Clients, kube_settings
from .status import node_lost_since, unplaced_since

logger = logging.getLogger(__name__)
NODE_LOST = "NodeLost"
VOLUME_TOPOLOGY = "VolumeTopology"
_checked: dict[tuple[int, str], list[dict] | None] = {}  # (cluster, pod uid) -> the terms read for it


def home_topology(clients: Clients, workload: Workload) -> list[dict] | None:
    """The node affinity terms of the PV the notebook's home claim is bound to ([] when the PV
    pins nothing), or None when the claim is missing or not bound yet."""
    namespace = namespace_of(workload)
    try:
        claim = clients.call(clients.core.read_namespaced_persistent_volume_claim,
                             m.home_claim_name(workload.pk), namespace)
        volume = (claim.get("spec") or {}).get("volumeName")
        if not volume or (claim.get("status") or {}).get("phase") != "Bound":
            return None
        pv = clients.call(clients.core.read_persistent_volume, volume)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return terms_of((pv.get("spec") or {}).get("nodeAffinity"))


def _known_topology(reconciler, workload: Workload, pod: dict) -> list[dict] | None:
    """The home claim's terms, read once per pod (None: not bound yet), recorded on the workload."""
    uid = (pod.get("metadata") or {}).get("uid") or ""
    key = (reconciler.cluster_id, uid)
    if key in _checked and _checked[key] is not None:
        return _checked[key]
    try:
        terms = home_topology(reconciler.clients, workload)
    except ApiError as exc:  # e.g. no right to read PersistentVolumes: placement as before, said once
        logger.warning("kubernetes: the home volume of notebook %s: %s %s", workload.pk, exc.status, exc.reason)
        terms = []
    if len(_checked) > 10_000:
        _checked.clear()
    _checked[key] = terms
    if terms is not None and terms != (workload.node_affinity or []):
        Workload.objects.filter(pk=workload.pk).update(node_affinity=terms)
        workload.node_affinity = terms
    return terms


def _lost(reconciler, pods: list[dict]) -> tuple[dict, str, float] | None:
    """(pod, node, since) of the notebook's pod on a node that is not Ready, if any."""
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or not is_alive(pod):
            continue
        node = reconciler.informers["nodes"].get("", node_name)
        since = node_lost_since(node) if node is not None else None
        if since is not None:
            return pod, node_name, since
    return None


def notebook_check(reconciler, workload: Workload, pods: list[dict]) -> bool | None:
    """A running notebook's node and volume: True/False when handled here (acted or not), None
    when the ordinary conditions apply."""
    lost = _lost(reconciler, pods)
    if lost is not None:
        return _node_lost(reconciler, workload, *lost)
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp") or not is_alive(pod):
            continue
        if (pod.get("spec") or {}).get("nodeName"):
            _known_topology(reconciler, workload, pod)  # bound by now: the scheduler binds the claim first
        elif unplaced_since(pod) is not None and not workload.node_affinity:
            acted = _misplaced(reconciler, workload, pod)
            if acted is not None:
                return acted
    return None


def _misplaced(reconciler, workload: Workload, pod: dict) -> bool | None:
    """A pending pod whose bound home volume does not allow the node Cairn placed it on (placed
    before its affinity was known): back to the queue with the affinity recorded."""
    terms = _known_topology(reconciler, workload, pod)
    if not terms:
        return None
    placed = [e.get("node") for e in workload.placement or [] if isinstance(e, dict) and e.get("node")]
    labels = dict(Node.objects.filter(cluster_id=reconciler.cluster_id, name__in=placed).values_list("name", "labels"))
    if all(node_matches(name, labels.get(name) or {}, terms) for name in placed):
        return None
    return reconciler._requeue_free(
        workload, VOLUME_TOPOLOGY, f"Its home volume may only be used on nodes with {describe_terms(terms)}, not on "
        f"{', '.join(placed)}: requeued to start there, without spending a restart.")


def _node_lost(reconciler, workload: Workload, pod: dict, node: str, since: float) -> bool:
    grace = float(kube_settings()["NODE_LOST_GRACE_SECONDS"])
    waited = time.time() - since
    name = (pod.get("metadata") or {}).get("name", "")
    if waited < grace:
        reconciler.queue.add_after("workload", workload.pk, max(0.5, grace - waited + 0.5))
        return _show_lost(reconciler, workload, node, (
            f"Node {node} of pod {name} is not Ready: the notebook cannot be reached. Cairn starts it again "
            f"elsewhere if the node is not back within {format_duration(grace)}."))
    terms = _known_topology(reconciler, workload, pod)
    terms = terms if terms is not None else list(workload.node_affinity or [])
    others = [n for n, labels in Node.objects.filter(
        pool_id=workload.pool_id, schedulable=True, health__in=("healthy", "degraded")).exclude(name=node)
        .values_list("name", "labels") if node_matches(n, labels or {}, terms)]
    where = (f"its home volume allows nodes with {describe_terms(terms)} only" if terms else
             "its home volume is not pinned to a node")
    if others:
        message = (f"Node {node} of pod {name} has not been Ready for {format_duration(grace)}: requeued to start "
                   f"on another node ({where}; {len(others)} Ready), with its files, without spending a restart.")
    else:
        message = (f"Node {node} of pod {name} has not been Ready for {format_duration(grace)}: requeued, but "
                   f"{where} and no other Ready node of pool '{workload.pool.name}' does; it waits for one "
                   "(or for the node to come back).")
    requeued = reconciler._requeue_free(workload, NODE_LOST, message)
    if requeued:
        force_delete(reconciler.clients, pod)
    return requeued


def force_delete(clients: Clients, pod: dict) -> None:
    """Delete a pod on a lost node with no grace period: no kubelet will confirm it."""
    meta = pod.get("metadata") or {}
    try:
        clients.call(clients.core.delete_namespaced_pod, meta["name"], meta["namespace"], grace_period_seconds=0)
    except ApiError as exc:
        if exc.status != 404:
            raise
    logger.info("kubernetes: pod %s/%s force-deleted (its node is lost)", meta.get("namespace"), meta.get("name"))


def _show_lost(reconciler, workload: Workload, node: str, message: str) -> bool:
    """Condition ContainersReady False (reason NodeLost) and a Warning event, once."""
    current = {c.get("type"): c for c in workload.conditions or []}
    old = current.get("ContainersReady") or {}
    if old.get("status") == "False" and old.get("reason") == NODE_LOST and old.get("message") == message:
        return False
    current["ContainersReady"] = {"type": "ContainersReady", "status": "False", "reason": NODE_LOST,
                                  "message": message, "lastTransitionTime": timezone.now().isoformat()}
    if not reconciler._cas(workload, conditions=list(current.values())):
        return False
    workload_event_record(workload=workload, reason=NODE_LOST, message=message, type=EventType.WARNING)
    return True
