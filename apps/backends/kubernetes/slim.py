"""What the reconciler keeps of each object it caches (issue 42: 1,000 nodes, 20,000 pods).

An object as the API server answers carries much Cairn never reads: `managedFields` (often half
of a pod's bytes), a Job's whole pod template, a Node's image list (tens of KB on a GPU node),
container IDs, IPs, heartbeats. Each informer slims what it ingests, before caching it, to the
fields the reconciler and its helpers read (status.py, storage.cache_report, backend.is_alive,
backend.sync_deployment). A field read from a cached object must be kept here: the tests in
tests/backends/kubernetes/test_slim.py hold each reader to its object's slim form.

Slimming also says when an update changed nothing Cairn looks at: a Node's status heartbeat
(every 10 s per node; only `lastHeartbeatTime` moves) compares equal once slimmed, so it wakes
nothing (Informer.apply).

Each function returns a new dict and leaves its argument alone.
"""
from __future__ import annotations

from collections.abc import Callable

# Annotations nobody reads that can be large.
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_META_KEYS = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
              "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
              "finalizers")
_OWNER_KEYS = ("apiVersion", "kind", "name", "uid", "controller")
_CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")


def _pick(obj: dict | None, keys) -> dict:
    obj = obj or {}
    return {k: obj[k] for k in keys if k in obj and obj[k] not in (None, "", [], {})}


def slim_meta(meta: dict | None, *, annotations: bool = True) -> dict:
    meta = meta or {}
    out = _pick(meta, _META_KEYS)
    if "annotations" in out:
        kept = {k: v for k, v in out["annotations"].items() if k not in _DROPPED_ANNOTATIONS} if annotations else {}
        if kept:
            out["annotations"] = kept
        else:
            del out["annotations"]
    if "ownerReferences" in out:
        out["ownerReferences"] = [_pick(ref, _OWNER_KEYS) for ref in out["ownerReferences"]]
    return out


def _conditions(conditions) -> list[dict]:
    return [_pick(c, _CONDITION_KEYS) for c in conditions or []]


def _container_status(status: dict) -> dict:
    # state / lastState whole: a terminated state's message is the dataset fill's cache report
    # (storage.cache_report) or a failed replica's last output (status.pod_view)
    return _pick(status, ("name", "image", "ready", "started", "restartCount", "state", "lastState"))


def _container_resources(containers) -> list[dict]:
    return [_pick(c, ("name", "resources", "restartPolicy")) for c in containers or []]


def slim_pod(pod: dict) -> dict:
    """Cairn's pods: labels and annotations (workload, attempt, completion index), owner, node,
    scheduling gates and node selector (placement), the containers' resources, and the status a
    replica's state, problems and cache report come from."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    slim_spec = _pick(spec, ("nodeName", "schedulingGates", "nodeSelector", "priorityClassName", "overhead"))
    if spec.get("containers"):
        slim_spec["containers"] = _container_resources(spec["containers"])
    if spec.get("initContainers"):
        slim_spec["initContainers"] = _container_resources(spec["initContainers"])
    slim_status = _pick(status, ("phase", "reason", "message", "startTime", "nominatedNodeName"))
    if status.get("conditions"):
        slim_status["conditions"] = _conditions(status["conditions"])
    for key in ("containerStatuses", "initContainerStatuses"):
        if status.get(key):
            slim_status[key] = [_container_status(s) for s in status[key]]
    return {"metadata": slim_meta(pod.get("metadata")), "spec": slim_spec, "status": slim_status}


def slim_job(job: dict) -> dict:
    """A Job without its pod template (the bulk of it): its spec's counts, deadline and suspend,
    and its status (conditions, startTime, active / succeeded / failed)."""
    spec = {k: v for k, v in (job.get("spec") or {}).items() if k not in ("template", "selector")}
    status = dict(job.get("status") or {})
    status.pop("uncountedTerminatedPods", None)
    if status.get("conditions"):
        status["conditions"] = [_pick(c, (*_CONDITION_KEYS, "lastProbeTime")) for c in status["conditions"]]
    return {"metadata": slim_meta(job.get("metadata")), "spec": spec, "status": status}


def slim_workload_object(obj: dict) -> dict:
    """A StatefulSet or Deployment (one per notebook / deployment: few): whole but for
    managedFields. sync_deployment reads the Deployment's pod template and strategy."""
    return {**{k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")},
            "metadata": slim_meta(obj.get("metadata"))}


def slim_node(node: dict) -> dict:
    """What node_inventory reads: labels, capacity, allocatable, conditions without their
    heartbeat, the architecture, cordon and taints. No images, volumes or heartbeats."""
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    slim_status = _pick(status, ("capacity", "allocatable"))
    if status.get("conditions"):
        slim_status["conditions"] = _conditions(status["conditions"])
    info = _pick(status.get("nodeInfo"), ("architecture", "operatingSystem"))
    if info:
        slim_status["nodeInfo"] = info
    return {"metadata": slim_meta(node.get("metadata"), annotations=False),
            "spec": _pick(spec, ("unschedulable", "taints")), "status": slim_status}


def slim_event(event: dict) -> dict:
    """A Warning event: what it is about, why, and when (status.event_time)."""
    out = _pick(event, ("type", "reason", "message", "count", "firstTimestamp", "lastTimestamp", "eventTime"))
    out["involvedObject"] = _pick(event.get("involvedObject"), ("kind", "name", "namespace", "uid"))
    if event.get("series"):
        out["series"] = _pick(event["series"], ("count", "lastObservedTime"))
    out["metadata"] = _pick(event.get("metadata"), ("name", "namespace", "uid", "resourceVersion",
                                                    "creationTimestamp"))
    return out


SLIM: dict[str, Callable[[dict], dict]] = {
    "pods": slim_pod, "jobs": slim_job, "statefulsets": slim_workload_object, "deployments": slim_workload_object,
    "nodes": slim_node, "events": slim_event,
}


def same_but_version(old: dict | None, new: dict) -> bool:
    """Whether two slimmed objects differ in nothing but their resourceVersion."""
    if old is None:
        return False
    a, b = old.get("metadata") or {}, new.get("metadata") or {}
    if {k: v for k, v in a.items() if k != "resourceVersion"} != {k: v for k, v in b.items()
                                                                    if k != "resourceVersion"}:
        return False
    return all(old.get(k) == new.get(k) for k in set(old) | set(new) if k != "metadata")
