"""Pure mapping from objects as the API returns them (dicts) to Cairn's view: replica states,
problems worth a human-readable condition, and node inventory. No I/O; unit-tested directly."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubernetes.utils import parse_quantity

from apps.backends.base import EXITED, LOST, RUNNING, ReplicaState
from apps.clusters.accelerators import ARCH_LABEL, Vendor, normalise_arch, vendors_for_cluster

from .manifests import COMPLETION_INDEX_ANNOTATION, CONTAINER, LABEL_ATTEMPT

# Waiting reasons that mean the replica will not start without someone changing something.
IMAGE_PULL_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"})
BROKEN_REASONS = IMAGE_PULL_REASONS | {"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError",
                                       "RunContainerError"}


@dataclass(frozen=True)
class Problem:
    """Something a user should see on the workload, as a condition: why replicas are not running."""

    condition: str  # PodScheduled | ContainersReady
    reason: str  # Unschedulable, ImagePullBackOff, OOMKilled, CrashLoopBackOff, ...
    message: str


@dataclass(frozen=True)
class PodView:
    name: str
    replica: int
    attempt: int | None
    state: ReplicaState
    reason: str  # OOMKilled, Error, Completed, Evicted, ... ('' when running)
    problem: Problem | None
    ready: bool
    # a failed container's termination message: with FallbackToLogsOnError, its log's last lines
    output: str = ""


def epoch_seconds(value: str | None) -> float | None:
    """A Kubernetes timestamp (RFC 3339) in seconds since the epoch; None if absent or malformed."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def event_time(event: dict) -> float:
    """When an event last happened, in epoch seconds: events.k8s.io/v1 events (what newer
    controllers and the scheduler record) have `eventTime` and a `series` and may leave the
    core/v1 `lastTimestamp` empty; older ones have `lastTimestamp`. 0 when none is set."""
    series = event.get("series") or {}
    for value in (series.get("lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime"),
                  event.get("firstTimestamp"), (event.get("metadata") or {}).get("creationTimestamp")):
        at = epoch_seconds(value)
        if at is not None:
            return at
    return 0.0


def pod_replica(pod: dict) -> int:
    """The replica number: the Job completion index, else the StatefulSet ordinal, else 0."""
    meta = pod.get("metadata") or {}
    index = (meta.get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION) or (meta.get("labels") or {}).get(
        COMPLETION_INDEX_ANNOTATION)
    if index is not None and str(index).isdigit():
        return int(index)
    tail = (meta.get("name") or "").rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _main_status(pod: dict) -> dict:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == CONTAINER:
            return status
    return statuses[0] if statuses else {}


def pod_view(pod: dict, *, replica: int | None = None) -> PodView:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    replica = pod_replica(pod) if replica is None else replica
    attempt_label = (meta.get("labels") or {}).get(LABEL_ATTEMPT)
    attempt = int(attempt_label) if attempt_label and attempt_label.isdigit() else None
    main = _main_status(pod)
    state = main.get("state") or {}
    terminated = state.get("terminated") or {}
    waiting = state.get("waiting") or {}
    last_terminated = (main.get("lastState") or {}).get("terminated") or {}
    name = meta.get("name", "")
    problem: Problem | None = None
    failed_init = _failed_init(status)
    if phase in ("Succeeded", "Failed"):
        if not terminated and failed_init is not None:  # the main container never ran
            terminated = {**failed_init[1], "reason": f"Init:{failed_init[1].get('reason') or 'Error'}"}
        exit_code = terminated.get("exitCode")
        if exit_code is None:
            exit_code = 0 if phase == "Succeeded" else None
        reason = terminated.get("reason") or status.get("reason") or ("Completed" if phase == "Succeeded" else "")
        replica_state = ReplicaState(
            replica=replica, phase=EXITED if exit_code is not None else LOST, exit_code=exit_code,
            signal=exit_code - 128 if exit_code and exit_code > 128 else None,
            finished_at=epoch_seconds(terminated.get("finishedAt")),
        )
        output = _tail(terminated.get("message") or "") if exit_code not in (0, None) else ""
        return PodView(name, replica, attempt, replica_state, reason, None, False, output)
    if meta.get("deletionTimestamp") is None:
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                problem = Problem("PodScheduled", condition.get("reason") or "Unschedulable",
                                  f"Replica {replica} cannot be scheduled: {condition.get('message') or 'no node fits'}")
        if waiting.get("reason") in BROKEN_REASONS:
            reason = waiting["reason"]
            if reason in IMAGE_PULL_REASONS:
                image = main.get("image") or "its image"
                text = f"Replica {replica} cannot pull image '{image}'"
            else:
                text = f"Replica {replica} cannot start ({reason})"
            if last_terminated.get("reason") == "OOMKilled":
                reason = "OOMKilled"
                text = f"Replica {replica} keeps running out of memory (OOMKilled) and is restarted"
            detail = waiting.get("message")
            problem = Problem("ContainersReady", reason, f"{text}: {detail}" if detail else f"{text}.")
        elif failed_init is not None:  # an init container (the dataset fill) keeps failing
            init_name, init_state = failed_init
            why = init_state.get("reason") or "Error"
            detail = _tail(init_state.get("message") or "", lines=3)
            problem = Problem("ContainersReady", f"Init:{why}",
                              f"Replica {replica} cannot start: its init container {init_name} failed ({why})"
                              + (f": {detail}" if detail else "."))
    ready = phase == "Running" and bool(main.get("ready", True))
    return PodView(name, replica, attempt, ReplicaState(replica=replica, phase=RUNNING), "", problem, ready)


def disruption(pod: dict) -> str | None:
    """Why a pod was disrupted (its DisruptionTarget condition: EvictionByEvictionAPI,
    PreemptionByScheduler, DeletionByTaintManager, DeletionByPodGC, TerminationByKubelet), or None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return f"{condition.get('reason') or 'Disrupted'}: {condition.get('message') or ''}".rstrip(": ")
    return None


def node_lost_since(node: dict) -> float | None:
    """Since when (epoch seconds) a Node has not been Ready (Ready False or Unknown: its kubelet
    stopped reporting), or None while it is Ready."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") == "True":
        return None
    return epoch_seconds(ready.get("lastTransitionTime")) or 0.0


def job_failure(job: dict | None) -> tuple[str, str] | None:
    """(reason, message) once the Job controller decided the Job failed: its Failed condition, or
    FailureTarget, set first while the pods still terminate (on a lost node they never finish
    terminating, and Failed never comes). None otherwise."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Failed", "FailureTarget") and condition.get("status") == "True":
            return condition.get("reason") or "Failed", condition.get("message") or ""
    return None


def _failed_init(status: dict) -> tuple[str, dict] | None:
    """(name, its state) of an init container that failed (exited non-zero) or waits in a broken
    state (CrashLoopBackOff, image pull errors); None when they are fine."""
    for init in status.get("initContainerStatuses") or []:
        state = init.get("state") or {}
        done = state.get("terminated") or {}
        if done and done.get("exitCode") not in (0, None):
            return init.get("name", ""), done
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in BROKEN_REASONS:
            last = (init.get("lastState") or {}).get("terminated") or {}
            return init.get("name", ""), {**last, "reason": waiting["reason"],
                                          "message": waiting.get("message") or last.get("message") or ""}
    return None


def _tail(text: str, *, lines: int = 10, chars: int = 1000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def job_deadline_exceeded(job: dict | None) -> str | None:
    """The Job controller's message when the Job was stopped at its activeDeadlineSeconds (condition
    Failed, or FailureTarget while its pods are still terminating, with reason DeadlineExceeded);
    None otherwise."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if (condition.get("type") in ("Failed", "FailureTarget") and condition.get("status") == "True"
                and condition.get("reason") == "DeadlineExceeded"):
            return condition.get("message") or "Job was active longer than specified deadline"
    return None


def describe_failure(view: PodView, *, memory_mb: int | None = None) -> str:
    """'Replica 0 was killed for running out of memory (OOMKilled, limit 256Mi).' and the like."""
    state = view.state
    if view.reason == "OOMKilled":
        limit = f", limit {memory_mb}Mi" if memory_mb else ""
        return f"Replica {view.replica} was killed for running out of memory (OOMKilled{limit})."
    if state.phase == LOST:
        why = f" ({view.reason})" if view.reason else ""
        return f"Replica {view.replica} failed without an exit code{why}."
    text = state.describe()
    if view.reason and view.reason not in ("Error", "Completed"):
        text = text[:-1] + f" ({view.reason})."
    if view.output:  # kept here: the pod, and its log, go with the attempt's Job
        text += f" Its last output:\n{view.output}"
    return text


# -- nodes ---------------------------------------------------------------------------------------

DEFAULT_TOPOLOGY_KEYS = ("topology.kubernetes.io/rack", "cloud.google.com/gke-nodepool", "topology.kubernetes.io/zone")


def _milli(value) -> int:
    try:
        return int(parse_quantity(value) * 1000) if value is not None else 0
    except ValueError:
        return 0


def _mib(value) -> int:
    try:
        return int(parse_quantity(value) / (1024 * 1024)) if value is not None else 0
    except ValueError:
        return 0


def _count(value) -> int:
    try:
        return int(parse_quantity(value)) if value is not None else 0
    except ValueError:
        return 0


def node_accelerators(labels: dict, allocatable: dict, vendors: dict[str, Vendor]) -> tuple[str, int, str, int]:
    """(type, count, model, memory MiB) of a node's accelerators: the first vendor whose extended
    resource the node has allocatable (Ascend also under a model-specific name such as
    huawei.com/Ascend910B3, HAMi's), its product label, its memory label."""
    for key, v in vendors.items():
        names = [v.resource]
        if key == "ascend":
            names += sorted(n for n in allocatable if n.startswith("huawei.com/Ascend")
                            and not n.endswith(("-memory", "-core")) and n != v.resource)
        for name in names:
            count = _count(allocatable.get(name))
            if count <= 0:
                continue
            model = next((labels[p] for p in v.product_labels if labels.get(p)), "")
            model = model.removeprefix("huawei-")
            if not model and name != v.resource:
                model = name.rsplit("/", 1)[-1]  # huawei.com/Ascend910B3 -> Ascend910B3
            memory = str(labels.get(v.memory_label, "")) if v.memory_label else ""
            memory_mb = int(memory) if memory.isdigit() else _mib(memory) if memory else 0
            return key, min(count, 32767), model[:100], memory_mb
    return "none", 0, "", 0


def node_inventory(node: dict, *, gpu_resource: str, gpu_product_label: str, topology_keys=(),
                   vendors: dict[str, Vendor] | None = None, now: float | None = None,
                   lost_after: float | None = None) -> dict:
    """Cairn Node fields from a Kubernetes Node. `vendors` (apps.clusters.accelerators) say which
    resources and labels name each vendor's devices; without them, NVIDIA's are `gpu_resource` and
    `gpu_product_label` and the other vendors' are the defaults."""
    if vendors is None:
        vendors = vendors_for_cluster({}, nvidia_defaults={"gpu_resource": gpu_resource,
                                                           "gpu_product_label": gpu_product_label})
    meta = node.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    lost = node_lost_since(node)
    if lost is not None and lost_after is not None and now is not None and now - lost >= lost_after:
        health = "unhealthy"  # Ready Unknown (or False) past the grace: its pods are not coming back
    elif ready is None or ready.get("status") == "Unknown":
        health = "unknown"
    elif ready.get("status") == "True":
        pressure = any(c.get("status") == "True" for c in status.get("conditions") or []
                       if c.get("type") in ("MemoryPressure", "DiskPressure", "PIDPressure"))
        health = "degraded" if pressure else "healthy"
    else:
        health = "unhealthy"
    accelerator, count, model, memory_mb = node_accelerators(labels, allocatable, vendors)
    arch = normalise_arch(labels.get(ARCH_LABEL) or (status.get("nodeInfo") or {}).get("architecture") or "")
    topology = ""
    for key in [*topology_keys, *DEFAULT_TOPOLOGY_KEYS]:
        if labels.get(key):
            topology = labels[key]
            break
    return {
        "labels": labels,
        "cpu_milli_capacity": _milli(capacity.get("cpu")),
        "cpu_milli_allocatable": _milli(allocatable.get("cpu")),
        "memory_mb_capacity": _mib(capacity.get("memory")),
        "memory_mb_allocatable": _mib(allocatable.get("memory")),
        "accelerator_type": accelerator,
        "cpu_arch": arch,
        "gpu_count": count,
        "gpu_model": model,
        "gpu_memory_mb": memory_mb,
        "topology_domain": topology[:100],
        "health": health,
        "schedulable": not (node.get("spec") or {}).get("unschedulable", False),  # cordoned
    }


# -- what others hold on each node (issue 42: capacity that counts others) ------------------------

def _container_requests(container: dict) -> dict:
    """A container's requests, its limits standing in where a request is not given (what the API
    server's defaulting does for every resource: extended resources may only be given as limits)."""
    resources = container.get("resources") or {}
    return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}


def pod_requests(pod: dict, device_resources: tuple[str, ...]) -> tuple[int, int, int]:
    """(devices x 1000, CPU milli, memory MiB) a pod holds on its node, computed as kube-scheduler
    does: the containers' requests summed (sidecars, init containers with restartPolicy Always,
    included), or the largest init container's (plus the sidecars started before it) when that is
    more, plus the pod's overhead (RuntimeClass). `device_resources`: the accelerators' resource
    names (nvidia.com/gpu, amd.com/gpu, ...)."""
    spec = pod.get("spec") or {}

    def amounts(requests: dict) -> list[int]:
        devices = sum(_count(requests.get(name)) for name in device_resources)
        return [devices * 1000, _milli(requests.get("cpu")), _mib(requests.get("memory"))]

    total = [0, 0, 0]
    sidecars = [0, 0, 0]
    init_peak = [0, 0, 0]
    for init in spec.get("initContainers") or []:
        own = amounts(_container_requests(init))
        if init.get("restartPolicy") == "Always":
            sidecars = [a + b for a, b in zip(sidecars, own, strict=True)]
        else:
            init_peak = [max(p, a + s) for p, a, s in zip(init_peak, own, sidecars, strict=True)]
    for container in spec.get("containers") or []:
        total = [a + b for a, b in zip(total, amounts(_container_requests(container)), strict=True)]
    total = [max(t + s, p) for t, s, p in zip(total, sidecars, init_peak, strict=True)]
    overhead = amounts(spec.get("overhead") or {})
    gpu, cpu, memory = (t + o for t, o in zip(total, overhead, strict=True))
    return gpu, cpu, memory


def holds_node(pod: dict) -> bool:
    """Whether a pod holds resources on a node: bound to one and not terminal (kube-scheduler
    counts a terminating pod until it is gone)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


# What is kept of a pod that is not Cairn's: what the reconciler needs to count it on its node.
_FOREIGN_SPEC_KEYS = ("nodeName", "containers", "initContainers", "overhead")


def slim_foreign_pod(pod: dict) -> bool:
    """Shrink, in place, a pod Cairn does not own to what capacity needs (its name, node, phase and
    containers' resources); True when it holds resources on a node (worth keeping). Used as the
    `keep` of the informer of others' pods: a cluster's other tenants may have many pods."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    slim_spec = {}
    for key in _FOREIGN_SPEC_KEYS:
        value = spec.get(key)
        if key in ("containers", "initContainers") and value:
            value = [{k: c[k] for k in ("name", "resources", "restartPolicy") if k in c} for c in value]
        if value:
            slim_spec[key] = value
    pod.clear()
    pod.update({
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "ownerReferences")
                     if k in meta},
        "spec": slim_spec,
        "status": {"phase": status.get("phase")},
    })
    return holds_node(pod)


def usage_by_node(pods: list[dict], device_resources: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    """Node name -> (devices x 1000, CPU milli, memory MiB) the given pods hold there."""
    used: dict[str, list[int]] = {}
    for pod in pods:
        if not holds_node(pod):
            continue
        node = pod["spec"]["nodeName"]
        total = used.setdefault(node, [0, 0, 0])
        for i, amount in enumerate(pod_requests(pod, device_resources)):
            total[i] += amount
    return {node: (gpu, cpu, memory) for node, (gpu, cpu, memory) in used.items()}


def unplaced_since(pod: dict) -> float | None:
    """Since when (epoch seconds) a live pod has been waiting for a node: created and not bound
    (gated, or unschedulable); None once bound, finished or being deleted."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName"):
        return None
    if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
        return None
    return epoch_seconds(meta.get("creationTimestamp"))


# -- Kueue as the admission authority (issue 42, deliver 4) -------------------------------------

KUEUE_WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # on the Workload Kueue creates for a Job


def kueue_state(workloads: list[dict]) -> tuple[str, str, str] | None:
    """What Kueue says of a Job, from its Workload (the newest, if several): ("admitted", reason,
    message), ("evicted", reason, message) — preempted, stopped queue, ... —, or ("held", reason,
    message) while it waits in its queue (QuotaReserved / Admitted False, Kueue's own words).
    None when Kueue has made no Workload for it (yet)."""
    if not workloads:
        return None
    newest = max(workloads, key=lambda w: (w.get("metadata") or {}).get("creationTimestamp") or "")
    conditions = {c.get("type"): c for c in (newest.get("status") or {}).get("conditions") or []}
    evicted = conditions.get("Evicted") or {}
    if evicted.get("status") == "True":
        return "evicted", evicted.get("reason") or "Evicted", evicted.get("message") or ""
    admitted = conditions.get("Admitted") or {}
    if admitted.get("status") == "True":
        return "admitted", admitted.get("reason") or "Admitted", admitted.get("message") or ""
    waiting = conditions.get("QuotaReserved") or admitted
    return ("held", waiting.get("reason") or "Pending",
            waiting.get("message") or "Waiting in its Kueue queue for quota.")


# -- Volcano as the admission authority (issue 42, deliver 4) -----------------------------------

VOLCANO_PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")


@dataclass(frozen=True)
class VolcanoState:
    """What Volcano says of a training attempt's PodGroup, in Cairn's words: whether its queue has
    taken it in (`admitted`), whether the gang is bound and running (`running`), and why not."""

    phase: str  # Pending | Inqueue | Running | Unknown | Completed ('' before Volcano wrote a status)
    admitted: bool
    running: bool
    reason: str
    message: str


def volcano_state(podgroup: dict | None, *, queue: str = "") -> VolcanoState:
    """Map a PodGroup's status to VolcanoState. Pending: Volcano's queue has not taken the gang
    in (enqueue refused it: not enough queue capacity, `Uninqueueable`/`NotInqueueable`); Inqueue:
    taken in, its pods not all bound yet (an `Unschedulable` condition says why: typically
    NotEnoughResources, "3/3 tasks in gang unschedulable: ..."); Running: at least minMember pods
    run; Unknown: some run, fewer than minMember; Completed. The newest True Unschedulable /
    Uninqueueable condition gives reason and message."""
    status = (podgroup or {}).get("status") or {}
    phase = status.get("phase") or ""
    blocking = [c for c in status.get("conditions") or []
                if c.get("type") in ("Unschedulable", "Uninqueueable") and c.get("status") == "True"]
    blocking.sort(key=lambda c: c.get("lastTransitionTime") or "")
    why = blocking[-1] if blocking else {}
    where = f"Volcano queue {queue!r}" if queue else "its Volcano queue"
    if phase in ("Running", "Completed"):
        return VolcanoState(phase, True, True, phase, "")
    if phase == "Unknown":
        return VolcanoState(phase, True, False, why.get("reason") or "Unknown",
                            why.get("message") or "Fewer of the gang's pods run than its minMember.")
    if phase == "Inqueue":
        return VolcanoState(phase, True, False, why.get("reason") or "Inqueue",
                            why.get("message") or "Taken into its queue; Volcano is binding the gang's pods.")
    return VolcanoState(phase or "Pending", False, False, why.get("reason") or "Pending",
                        why.get("message") or f"Waiting for {where} to take the gang in.")


def replicas_started_at(pods: list[dict], *, now: float) -> float | None:
    """When the first of these pods started running (epoch seconds): the earliest container
    `startedAt` of a Running pod, else its `startTime`, else `now`; None while none runs."""
    starts = []
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        running = [epoch_seconds(((s.get("state") or {}).get("running") or {}).get("startedAt"))
                   for s in status.get("containerStatuses") or []]
        running = [t for t in running if t is not None]
        at = min(running) if running else epoch_seconds(status.get("startTime"))
        starts.append(at if at is not None else now)
    if not starts:
        return None
    return min(starts)
