"""The Kubernetes backend: realise a workload as objects, stop it, observe its pods, read logs.

Like every backend it never writes workload status (apps.backends.services and the reconciler
in .reconciler do). Dispatch is idempotent: every object has a deterministic name, and a 409
AlreadyExists is answered by reading the object back and adopting it when its labels say it is
this workload's (otherwise a clear LaunchError: Cairn never takes over someone else's object).
Transient API failures (5xx, 429, timeouts) are retried with backoff in client.Clients.call and
then raised as TransientError, which leaves the workload ADMITTED for the task's own retry.
"""
from __future__ import annotations

import copy
import hashlib
import hmac
import logging
import math
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from kubernetes import client as k8s

from apps.backends.base import LOG_FRAME_CHARS, Backend, LaunchError, LogReader, ReplicaState
from apps.backends.launch_env import attempt_env
from apps.clusters import crypto
from apps.clusters.accelerators import vendors_for_cluster
from apps.clusters.choices import NodeHealth
from apps.clusters.models import PROFILE_FIELDS, Node
from apps.deployments.selectors import deployment_rollout_state
from apps.storage.selectors import volume_sizes_of
from apps.storage.services import datasets_of
from apps.workloads.deadlines import CLOCK_AWAITS_PODS, run_started_at, seconds_left
from apps.workloads.kinds import kind_spec

from . import manifests as m
from .client import ApiError, Clients, ConnectionNotConfigured, TransientError, clients_for, kube_settings
from .status import pod_view

if TYPE_CHECKING:
    from apps.clusters.models import Cluster
    from apps.workloads.models import Workload

logger = logging.getLogger(__name__)

PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")


def options_for(cluster: Cluster) -> m.ClusterOptions:
    """settings.CAIRN_KUBERNETES, overridden by the cluster's own config."""
    base = kube_settings()
    config = cluster.config or {}
    api_url = config.get("api_url") or base["API_URL"] or settings.CAIRN["PUBLIC_URL"]
    accelerators = vendors_for_cluster(config, nvidia_defaults={
        "gpu_resource": base["GPU_RESOURCE"], "shared_gpu_resources": base["SHARED_GPU_RESOURCES"],
        "gpu_product_label": base["GPU_PRODUCT_LABEL"]})
    nvidia = accelerators["nvidia"]
    return m.ClusterOptions(
        namespace_prefix=config.get("namespace_prefix", base["NAMESPACE_PREFIX"]),
        gpu_resource=nvidia.resource,
        shared_gpu_resources=dict(nvidia.shared_resources),
        gpu_product_label=nvidia.product_labels[0],
        tolerations=tuple(config.get("tolerations") or ()),
        volcano=bool(config.get("volcano", False)),
        volcano_queue=config.get("volcano_queue", "default"),
        kueue_queue=config.get("kueue_queue", ""),
        default_image=config.get("default_image", base["DEFAULT_IMAGE"]),
        notebook_image=config.get("notebook_image", base["NOTEBOOK_IMAGE"]),
        vscode_notebook_image=config.get("vscode_notebook_image", base["VSCODE_NOTEBOOK_IMAGE"]),
        notebook_storage=config.get("notebook_storage", base["NOTEBOOK_STORAGE"]),
        storage_class=config.get("storage_class", ""),
        checkpoint_storage=config.get("checkpoint_storage", "20Gi"),
        checkpoint_claim=config.get("checkpoint_claim", ""),
        api_url=api_url,
        image_pull_secrets=tuple(config.get("image_pull_secrets") or ()),
        deployment_hpa=bool(config.get("deployment_hpa", False)),
        accelerators=accelerators,
        volume_storage_class=config.get("volume_storage_class", ""),
        dataset_cache_path=config.get("dataset_cache_path", "/var/lib/cairn/dataset-cache"),
        dataset_cache_gb=float(config.get("dataset_cache_gb", settings.CAIRN["DATASET_CACHE_GB"])),
        cache_image=config.get("cache_image", "cairn:latest"),
        termination_grace_seconds=max(1, math.ceil(float(settings.CAIRN["STOP_GRACE_SECONDS"]))),
        ephemeral_storage=config.get("ephemeral_storage", base["EPHEMERAL_STORAGE"]),
        priority_classes=dict(config.get("priority_classes") or base["PRIORITY_CLASSES"] or {}),
        network_policies=bool(config.get("network_policies", base["NETWORK_POLICIES"])),
        cairn_namespace=config.get("cairn_namespace", base["CAIRN_NAMESPACE"]),
        cairn_cidrs=tuple(config.get("cairn_cidrs", base["CAIRN_CIDRS"]) or ()),
        egress_cidrs=tuple(config.get("egress_cidrs", base["EGRESS_CIDRS"]) or ()),
    )


def notebook_token(workload_id: int) -> str:
    """Deterministic per workload, so a redelivered dispatch computes the same Secret."""
    return hmac.new(settings.SECRET_KEY.encode(), f"cairn-notebook:{workload_id}".encode(), hashlib.sha256).hexdigest()[:40]


def view_for(workload: Workload, *, attempt: int, run_env: dict | None = None) -> m.WorkloadView:
    plan_of = kind_spec(workload.kind).revision_plan
    max_unavailable, revision, _ = plan_of(workload) if plan_of else (1, 1, {})
    return m.WorkloadView(
        revision=revision, max_unavailable=max_unavailable,
        id=workload.pk, kind=workload.kind, name=workload.name, project=workload.project.slug, attempt=attempt,
        replicas=workload.replicas, gpu_milli=workload.gpu_milli, cpu_milli=workload.cpu_milli,
        memory_mb=workload.memory_mb, spec=dict(workload.spec or {}), gpu_model=workload.gpu_model,
        accelerator_type=workload.accelerator_type, arch=tuple(a for a in workload.arch.split("|") if a),
        pool_node_selector=dict(workload.pool.node_selector or {}),
        placement_nodes=_placement_nodes(workload.placement),
        notebook_token=notebook_token(workload.pk) if kind_spec(workload.kind).access_token else "",
        run_env=dict(run_env or {}),
        active_deadline_seconds=_active_deadline(workload),
        excluded_nodes=_excluded_nodes(workload),
        volume_sizes=volume_sizes_of(workload),
        datasets=datasets_of(workload),
        priority=workload.priority,
        network=network_of(workload),
    )


def network_of(workload: Workload) -> dict:
    """The pool's network profile (apps/clusters/networks.py) for a training workload, else {}."""
    profile = workload.pool.network_profile if workload.pool.network_profile_id else None
    if profile is None or not kind_spec(workload.kind).runs_to_completion:
        return {}
    return {field: getattr(profile, field) for field in PROFILE_FIELDS}


def _placement_nodes(placement) -> tuple[str, ...]:
    """The node of each replica, in replica order ({"replica": i, "node": ...} entries)."""
    entries = [p for p in placement or [] if isinstance(p, dict) and p.get("node")]
    entries.sort(key=lambda p: p["replica"] if isinstance(p.get("replica"), int) else 0)
    return tuple(p["node"] for p in entries)


def release_gated(clients: Clients, pods: list[dict]) -> list[str]:
    """Release the pods Cairn created gated (manifests.PLACEMENT_GATE) to kube-scheduler, each on
    its replica's node (a nodeSelector set while gated, then the gate removed, in one JSON patch).
    Returns the names of the pods released. A pod gone or changed meanwhile is left to the next
    pass."""
    released = []
    for pod in pods:
        node = m.placement_of(pod)
        if node is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        meta = pod["metadata"]
        try:
            clients.call(clients.core.patch_namespaced_pod, meta["name"], meta["namespace"], m.ungate_patch(pod, node))
        except ApiError as exc:
            if exc.status not in (404, 409, 422):
                raise
            logger.info("kubernetes: releasing pod %s/%s to node %s: %s %s", meta["namespace"], meta["name"], node,
                        exc.status, exc.message)
            continue
        released.append(meta["name"])
    return released


def _excluded_nodes(workload: Workload) -> tuple[str, ...]:
    """Training: the cluster's nodes a job must be kept off (unhealthy, or cordoned as SlowNode)."""
    if not kind_spec(workload.kind).runs_to_completion:
        return ()
    bad = Node.objects.filter(cluster_id=workload.pool.cluster_id).filter(
        Q(health=NodeHealth.UNHEALTHY) | Q(cordon_reason=SLOW_NODE, schedulable=False))
    return tuple(sorted(bad.values_list("name", flat=True)[:200]))


SLOW_NODE = "SlowNode"  # the cordon reason of a straggler's node (apps/backends/healing.py)


def _active_deadline(workload: Workload) -> int | None:
    """The Job's activeDeadlineSeconds: the whole limit for the first attempt of an admission,
    what is left of it for a restart (restarts count against the limit; deadlines.py)."""
    if not kind_spec(workload.kind).runs_to_completion:
        return None
    left = seconds_left(workload, now=timezone.now())
    if left is None:
        return None
    return max(left, 1)  # the API wants a positive number; a spent limit is not restarted anyway


def namespace_of(workload: Workload) -> str:
    return m.namespace_for(workload.project.slug, options_for(workload.pool.cluster))


# -- object operations by kind -------------------------------------------------------------------

def _ops(clients: Clients, kind: str) -> tuple:
    """(create(namespace, body, **kw), read(namespace, name, **kw)) for a kind Cairn creates."""
    c, b, a, h, x = clients.core, clients.batch, clients.apps, clients.autoscaling, clients.custom
    namespaced = {
        "Service": (c.create_namespaced_service, c.read_namespaced_service),
        "Secret": (c.create_namespaced_secret, c.read_namespaced_secret),
        "PersistentVolumeClaim": (c.create_namespaced_persistent_volume_claim,
                                  c.read_namespaced_persistent_volume_claim),
        "Job": (b.create_namespaced_job, b.read_namespaced_job),
        "StatefulSet": (a.create_namespaced_stateful_set, a.read_namespaced_stateful_set),
        "Deployment": (a.create_namespaced_deployment, a.read_namespaced_deployment),
        "HorizontalPodAutoscaler": (h.create_namespaced_horizontal_pod_autoscaler,
                                    h.read_namespaced_horizontal_pod_autoscaler),
        "NetworkPolicy": (clients.networking.create_namespaced_network_policy,
                          clients.networking.read_namespaced_network_policy),
        "RoleBinding": (clients.rbac.create_namespaced_role_binding, clients.rbac.read_namespaced_role_binding),
        "PodDisruptionBudget": (_policy(clients).create_namespaced_pod_disruption_budget,
                                _policy(clients).read_namespaced_pod_disruption_budget),
    }
    if kind == "PersistentVolume":  # a dataset's NFS export or node path (storage._bound_claim)
        return (lambda ns, body, **kw: c.create_persistent_volume(body, **kw),
                lambda ns, name, **kw: c.read_persistent_volume(name, **kw))
    if kind == "Namespace":
        return (lambda ns, body, **kw: c.create_namespace(body, **kw), lambda ns, name, **kw: c.read_namespace(name, **kw))
    if kind == "PodGroup":
        group, version, plural = PODGROUPS
        return (lambda ns, body, **kw: x.create_namespaced_custom_object(group, version, ns, plural, body, **kw),
                lambda ns, name, **kw: x.get_namespaced_custom_object(group, version, ns, plural, name, **kw))
    create, read = namespaced[kind]
    return (lambda ns, body, **kw: create(ns, body, **kw), lambda ns, name, **kw: read(name, ns, **kw))


def _policy(clients: Clients) -> k8s.PolicyV1Api:
    """policy/v1 (PodDisruptionBudgets) over the clients' connection pool."""
    return k8s.PolicyV1Api(clients.api)


def _call_create(clients: Clients, manifest: dict) -> dict:
    create = _ops(clients, manifest["kind"])[0]
    return clients.call(create, manifest["metadata"].get("namespace", ""), manifest)


def _call_read(clients: Clients, kind: str, namespace: str, name: str) -> dict:
    return clients.call(_ops(clients, kind)[1], namespace, name)


def _owned_by(existing: dict, manifest: dict) -> bool:
    """Labels that identify the owner (project, workload, attempt) match the wanted object's."""
    have = (existing.get("metadata") or {}).get("labels") or {}
    want = manifest["metadata"].get("labels") or {}
    keys = [m.LABEL_MANAGED_BY, m.LABEL_PROJECT, m.LABEL_WORKLOAD, m.LABEL_ATTEMPT]
    return all(have.get(k) == want.get(k) for k in keys if k in want)


RBAC_SETTLE_SECONDS = 3.0  # a RoleBinding just created may take a moment to reach the authorizer


def ensure(clients: Clients, manifest: dict) -> str:
    """Create the object, or adopt the existing one when it is ours. Returns "created" / "adopted"."""
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    namespace = manifest["metadata"].get("namespace", "")
    settle = time.monotonic() + RBAC_SETTLE_SECONDS
    while True:
        try:
            _call_create(clients, manifest)
            return "created"
        except ApiError as exc:
            if exc.status == 403 and kind == "Secret" and time.monotonic() < settle:
                time.sleep(0.2)  # Secrets are allowed by the namespace's RoleBinding, maybe not seen yet
                continue
            if exc.status != 409:
                raise LaunchError(f"Kubernetes refused to create {kind} {namespace}/{name}: {exc.status} "
                                  f"{exc.reason}: {exc.message}") from None
            break
    existing = _call_read(clients, kind, namespace, name)
    if _owned_by(existing, manifest):
        return "adopted"
    where = f" in namespace {namespace}" if namespace else ""
    raise LaunchError(
        f"A {kind} named '{name}'{where} already exists and does not belong to this workload (its labels differ); "
        "Cairn will not take it over. Delete or rename it, then start the workload again."
    )


def whoami(clients: Clients) -> str:
    """The user name the API server authenticates Cairn's credentials as (SelfSubjectReview, which
    every authenticated identity may create), asked once per client."""
    if clients.username is None:
        review = clients.call(clients.authentication.create_self_subject_review,
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        clients.username = ((review.get("status") or {}).get("userInfo") or {}).get("username") or ""
    return clients.username


def _await_secret_access(clients: Clients, namespace: str) -> None:
    """A RoleBinding just created reaches the API server's authorizer a moment later: ask it
    (SelfSubjectAccessReview, allowed to every identity) until Cairn may create Secrets there,
    rather than be refused (a 403 an audit would show) and retry."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "secrets"}}}
    deadline = time.monotonic() + RBAC_SETTLE_SECONDS
    while time.monotonic() < deadline:
        answer = clients.call(clients.authorization.create_self_subject_access_review, review)
        if (answer.get("status") or {}).get("allowed"):
            return
        time.sleep(0.1)


def _weaker(level: str, than: str) -> bool:
    order = m.POD_SECURITY_LEVELS
    return level in order and (than not in order or order.index(level) > order.index(than))


def _check_pod_security(found: dict, name: str, level: str) -> None:
    """A namespace that exists already and enforces a stricter Pod Security level than a network
    profile needs is not changed (Cairn may not relabel namespaces: that right would let it weaken
    any namespace's Pod Security): its pods are refused (PodsCreated, with Pod Security's message)
    until an administrator labels it `pod-security.kubernetes.io/enforce=<level>`."""
    labels = (found.get("metadata") or {}).get("labels") or {}
    if _weaker(level, labels.get(m.POD_SECURITY_ENFORCE, "")):
        logger.warning("kubernetes: namespace %s enforces Pod Security %s; a pool's network profile needs %s: "
                       "label it pod-security.kubernetes.io/enforce=%s", name,
                       labels.get(m.POD_SECURITY_ENFORCE), level, level)


def ensure_namespace(clients: Clients, project: str, options: m.ClusterOptions, *,
                     pod_security: str = "restricted") -> None:
    """The project's namespace, with Cairn's RoleBinding (its Secrets) and NetworkPolicies in it.

    A namespace an administrator created beforehand is used as it is (409, or 403 when Cairn may
    not create namespaces at all: read it); its labels are not Cairn's to change. Cairn binds
    itself the `cairn-project` role there; where it may not (403), the administrator binds it."""
    manifest = m.namespace_manifest(project, options, enforce=pod_security)
    name = manifest["metadata"]["name"]
    try:
        clients.call(clients.core.create_namespace, manifest)
    except ApiError as exc:
        if exc.status not in (403, 409):
            raise LaunchError(f"Kubernetes refused to create Namespace {name}: {exc.status} {exc.reason}: "
                              f"{exc.message}") from None
        try:
            found = clients.call(clients.core.read_namespace, name)
        except ApiError as read:
            raise LaunchError(
                f"Namespace {name} could not be created ({exc.status} {exc.reason}) nor read ({read.status} "
                f"{read.reason}): create it (kubectl create namespace {name}) and let Cairn read it.") from None
        if pod_security != "restricted":
            _check_pod_security(found, name, pod_security)
    username = whoami(clients)
    if username:
        try:
            if ensure(clients, m.project_role_binding(project, options, m.rbac_subject(username))) == "created":
                _await_secret_access(clients, name)
        except LaunchError as exc:  # e.g. 403 in a namespace an administrator manages
            logger.warning("kubernetes: %s; Secrets in %s need the cairn-project role bound there", exc, name)
    for policy in m.network_policies(project, options):
        ensure(clients, policy)
    for secret in options.image_pull_secrets:
        _copy_pull_secret(clients, secret, options.cairn_namespace, name, project)


def _copy_pull_secret(clients: Clients, secret: str, source: str, namespace: str, project: str) -> None:
    """The cluster's `image_pull_secrets` live in Cairn's own namespace: each is copied into the
    project namespace (pods may only name Secrets of theirs). One that Cairn's namespace does
    not have is assumed to be in the project namespace already (an administrator's)."""
    try:
        original = clients.call(clients.core.read_namespaced_secret, secret, source)
    except ApiError as exc:
        if exc.status in (403, 404):
            return
        raise
    ensure(clients, {"apiVersion": "v1", "kind": "Secret", "type": original.get("type") or "Opaque",
                     "metadata": {"name": secret, "namespace": namespace,
                                  "labels": {m.LABEL_MANAGED_BY: m.MANAGED_BY, m.LABEL_PROJECT: project}},
                     "data": original.get("data") or {}})


def pods_of(clients: Clients, workload: Workload) -> list[dict]:
    data = clients.call(clients.core.list_namespaced_pod, namespace_of(workload),
                        label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}")
    return data.get("items") or []


def current_pods(pods: list[dict], workload: Workload, attempt: int) -> list[dict]:
    """Pods of the given attempt (a kind that runs to completion: a Job per attempt); every pod of
    the workload for the other kinds."""
    if not kind_spec(workload.kind).runs_to_completion:
        return pods
    return [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(m.LABEL_ATTEMPT) == str(attempt)]


def is_alive(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class KubernetesBackend(Backend):
    name = "kubernetes"

    def _clients(self, workload: Workload) -> Clients:
        try:
            return clients_for(workload.pool.cluster)
        except ConnectionNotConfigured as exc:
            raise LaunchError(str(exc)) from None

    def launch(self, workload: Workload, *, attempt: int, run_env: dict[str, str] | None = None) -> dict:
        clients = self._clients(workload)
        cluster = workload.pool.cluster
        options = options_for(cluster)
        # From the apps above (launch_env.py): tracking's run of this attempt and a write-only token.
        if run_env is None:
            run_env = attempt_env(workload=workload, attempt=attempt)
        view = view_for(workload, attempt=attempt, run_env=run_env)
        namespace = m.namespace_for(view.project, options)
        if kind_spec(workload.kind).runs_to_completion and attempt > 1:
            # Never two attempts' ranks at once (a requeue after a disruption or a move, a
            # restart): the earlier attempts' pods must be gone first. Retried by the caller.
            lingering = sorted(p["metadata"]["name"] for p in pods_of(clients, workload) if is_alive(p)
                               and ((p["metadata"].get("labels") or {}).get(m.LABEL_ATTEMPT) or "").isdigit()
                               and int(p["metadata"]["labels"][m.LABEL_ATTEMPT]) < attempt)
            if lingering:
                raise TransientError(f"Attempt {attempt} waits for pods of an earlier attempt to end: "
                                     f"{', '.join(lingering[:5])}.")
        ensure_namespace(clients, view.project, options,
                         pod_security=view.network.get("pod_security_level") or "restricted")
        objects = []
        for manifest in m.workload_manifests(view, options):
            outcome = ensure(clients, manifest)
            if outcome == "adopted" and manifest["kind"] in ("StatefulSet", "Deployment"):
                _scale_up(clients, manifest)
            objects.append({"kind": manifest["kind"], "name": manifest["metadata"]["name"], "outcome": outcome})
        job = next((o for o in objects if o["kind"] == "Job"), None)
        if job is not None:  # the attempt's Secrets go with its Job (garbage collector)
            found = clients.call(clients.batch.read_namespaced_job, job["name"], namespace)
            for o in objects:
                if o["kind"] == "Secret" and o["name"].startswith(f"{job['name']}-"):
                    clients.call(clients.core.patch_namespaced_secret, o["name"], namespace,
                                 m.owned_by_job({}, found))
        runtime: dict = {
            "backend": self.name, "attempt": attempt, "namespace": namespace, "objects": objects,
            "alive": True, "replicas": [],
        }
        kind = kind_spec(workload.kind)
        if kind.kubernetes_object == "Job":
            runtime["job"] = m.job_name(workload.pk, attempt)
            if (options.kueue_queue or options.volcano) and run_started_at(workload) is None:
                # The cluster's queue admits it: the run-time clock starts with its first replica
                # running (queues.py), not at this launch.
                runtime[CLOCK_AWAITS_PODS] = True
        elif kind.kubernetes_object == "StatefulSet":
            # Reached through Cairn's proxy (apps/notebooks/proxy.py): in-cluster DNS or the API
            # server's service proxy (notebook_upstream in kubernetes/proxy.py).
            runtime.update(url=f"http://{m.object_name(workload.pk)}.{namespace}.svc:{m.NOTEBOOK_PORT}/",
                           service=m.object_name(workload.pk), port=m.NOTEBOOK_PORT,
                           token=crypto.seal(view.notebook_token))  # encrypted at rest, as on the local backend
        else:
            runtime.update(url=f"http://{m.object_name(workload.pk)}.{namespace}.svc/")
        return runtime

    def signal(self, workload: Workload, *, force: bool = False) -> int:
        """Stop: training deletes the attempt's Job (and PodGroup) with propagation; notebooks and
        deployments scale to zero. `force` deletes the remaining pods with no grace period."""
        clients = self._clients(workload)
        namespace = namespace_of(workload)
        runtime = workload.runtime or {}
        alive = [p for p in pods_of(clients, workload) if is_alive(p)]
        canary = "canary" in runtime  # a deployment's canary pods (cairn.dev/canary) go with it
        if force and canary:
            alive += [p for p in clients.call(clients.core.list_namespaced_pod, namespace,
                                              label_selector=f"{m.LABEL_CANARY}={workload.pk}").get("items") or []
                      if is_alive(p)]
        if force:
            # Only pods whose node cannot end them: on a Ready node the kubelet kills the container
            # at the pod's terminationGracePeriodSeconds (Cairn's grace), and a forced delete would
            # only forget a pod still running there (its GPUs then look free to the scheduler).
            # A pod not being deleted yet (orphaned, say) is deleted with its own grace there.
            ready = _ready_nodes(clients, {(p.get("spec") or {}).get("nodeName") for p in alive} - {None, ""})
            acted = 0
            for pod in alive:
                on_ready_node = (pod.get("spec") or {}).get("nodeName") in ready
                if on_ready_node and pod["metadata"].get("deletionTimestamp"):
                    continue
                _ignore_missing(clients, clients.core.delete_namespaced_pod, pod["metadata"]["name"], namespace,
                                **({} if on_ready_node else {"grace_period_seconds": 0}))
                acted += 1
            return acted
        name = m.object_name(workload.pk)
        kind = kind_spec(workload.kind).kubernetes_object
        if kind == "Job":
            job = runtime.get("job") or m.job_name(workload.pk, workload.attempt)
            _ignore_missing(clients, clients.batch.delete_namespaced_job, job, namespace,
                            propagation_policy="Background")
            if options_for(workload.pool.cluster).volcano:
                _ignore_missing(clients, lambda n, ns, **kw: clients.custom.delete_namespaced_custom_object(
                    *PODGROUPS[:2], ns, PODGROUPS[2], n, **kw), job, namespace)
        elif kind == "StatefulSet":
            _ignore_missing(clients, clients.apps.patch_namespaced_stateful_set, name, namespace,
                            {"spec": {"replicas": 0}})
        else:
            # With the Deployment at zero the HPA stands still (it never scales up from zero).
            _ignore_missing(clients, clients.apps.patch_namespaced_deployment, name, namespace,
                            {"spec": {"replicas": 0}})
            if canary:
                _ignore_missing(clients, clients.apps.delete_namespaced_deployment, m.canary_name(workload.pk),
                                namespace, propagation_policy="Background")
                _ignore_missing(clients, clients.core.delete_namespaced_service, m.canary_name(workload.pk), namespace)
        return len(alive)

    def cleanup(self, workload: Workload, *, secrets_only: bool = False) -> int:
        """Delete what Cairn created for a finished workload (by name; gone already is fine):
        with `secrets_only` its Secrets (credentials: done as soon as it ends), else every object
        of it, its Jobs with their pods. A notebook's home claim is kept (the user's files), and
        a stopped notebook, which may be started again, keeps everything but its Secrets."""
        clients = self._clients(workload)
        namespace = namespace_of(workload)
        c, b, a, h, n = clients.core, clients.batch, clients.apps, clients.autoscaling, clients.networking
        deletes = {
            "Secret": c.delete_namespaced_secret, "Job": b.delete_namespaced_job,
            "Deployment": a.delete_namespaced_deployment, "StatefulSet": a.delete_namespaced_stateful_set,
            "HorizontalPodAutoscaler": h.delete_namespaced_horizontal_pod_autoscaler,
            "Service": c.delete_namespaced_service, "NetworkPolicy": n.delete_namespaced_network_policy,
            "PersistentVolumeClaim": c.delete_namespaced_persistent_volume_claim,
            "PodDisruptionBudget": _policy(clients).delete_namespaced_pod_disruption_budget,
        }
        restartable = m.starts_again_after_stop(workload.kind, workload.status)
        names = m.workload_object_names(workload.pk, max(workload.attempt, 1))
        names["PersistentVolumeClaim"].remove(m.home_claim_name(workload.pk))
        if restartable or secrets_only:
            names = {"Secret": [x for x in names["Secret"] if x != m.object_name(workload.pk) or not restartable]}
        deleted = 0
        for kind, kind_names in names.items():
            for name in kind_names:
                try:
                    clients.call(deletes[kind], name, namespace, propagation_policy="Background")
                    deleted += 1
                except ApiError as exc:
                    if exc.status != 404:
                        raise
        return deleted

    def sync_deployment(self, workload: Workload, main: dict, canary: dict | None) -> list[tuple[str, str]]:
        """Make a deployment's Deployments match Cairn's admitted replicas and its rollout (a
        level-triggered step of the reconciler; `main` and `canary` as observed, from the cache):

        - the main Deployment's replicas (Cairn's autoscaler changed the admitted ones; a canary
          takes one of them) and its strategy (maxSurge = the rollout's surge the scheduler admitted);
        - a new stable revision in its pod template (the Deployment controller then replaces the
          pods, each new one ready before the next old one goes);
        - the canary Deployment and Service `cairn-<id>-canary`, created, revised or deleted.

        Returns the events to record, (reason, message)."""
        clients = self._clients(workload)
        namespace, name = namespace_of(workload), m.object_name(workload.pk)
        state = deployment_rollout_state(workload)
        progress = m.deployment_progress(main)
        running_canary = m.deployment_progress(canary)["revision"] if canary is not None else None
        layout = m.deployment_layout(
            admitted=workload.replicas, stable=state.stable, canary=state.canary, surge=state.surge,
            surge_wanted=state.surge_wanted, max_unavailable=state.max_unavailable, running_canary=running_canary,
            main_complete=progress["complete"] and progress["revision"] == state.stable)
        events: list[tuple[str, str]] = []
        spec = main.get("spec") or {}
        patch: dict = {}
        if not options_for(workload.pool.cluster).deployment_hpa and spec.get("replicas") != layout.main_replicas:
            patch["replicas"] = layout.main_replicas
        if spec.get("strategy") != layout.strategy:
            patch["strategy"] = layout.strategy
        template = spec.get("template") or {}
        running = ((template.get("metadata") or {}).get("annotations") or {}).get(m.ANNOTATION_REVISION)
        # (the informer's copy may not show our own patch yet: the runtime remembers it)
        if (layout.template_ready and running != str(state.stable)
                and (workload.runtime or {}).get("revision") != state.stable):
            patch["template"] = m.revised_template(template, self._fresh_template(workload), state.stable)
            surge = layout.strategy["rollingUpdate"]["maxSurge"]
            events.append(("RolloutStarted", f"Revision {state.stable} is in the Deployment's pod template: the "
                                             "Deployment controller replaces the pods (a rolling update"
                                             + (f", with {surge} surge pod(s) admitted by Cairn's scheduler)."
                                                if surge else ").")))
        if patch:
            replace_spec(clients, "Deployment", namespace, name, lambda spec: spec.update(patch))
        canary_name = m.canary_name(workload.pk)
        if layout.canary_revision is None:
            if canary is not None or "canary" in (workload.runtime or {}):
                _ignore_missing(clients, clients.apps.delete_namespaced_deployment, canary_name, namespace,
                                propagation_policy="Background")
                _ignore_missing(clients, clients.core.delete_namespaced_service, canary_name, namespace)
                events.append(("CanaryRemoved", f"The canary Deployment {canary_name} is deleted: "
                                                f"revision {state.stable} serves every request."))
            return events
        if canary is not None and running_canary == layout.canary_revision:
            return events
        canary_spec = state.canary_spec if layout.canary_revision == state.canary else None
        fresh = self._fresh_template(workload, spec=canary_spec)
        view = view_for(workload, attempt=workload.attempt)
        wanted = m.canary_manifests(view, options_for(workload.pool.cluster), main_template=template,
                                    fresh_template=fresh, revision=layout.canary_revision)
        if canary is None:
            for manifest in wanted:
                if ensure(clients, manifest) == "adopted" and manifest["kind"] == "Deployment":
                    replace_spec(clients, "Deployment", namespace, canary_name,
                                 lambda spec, t=manifest["spec"]["template"]: spec.update(template=t))
            events.append(("CanaryStarted", f"Revision {layout.canary_revision} runs as a canary: Deployment "
                                            f"{canary_name} (one pod) behind Service {canary_name}."))
        else:
            replace_spec(clients, "Deployment", namespace, canary_name,
                         lambda spec: spec.update(template=wanted[-1]["spec"]["template"]))
        return events

    def _fresh_template(self, workload: Workload, *, spec: dict | None = None) -> dict:
        """The pod template the workload's Deployment would be created with now (with `spec`: of
        another revision, its command, image, env and resources)."""
        if spec is not None:
            workload = copy.copy(workload)
            workload.spec = spec
            for key, value in (spec.get("resources") or {}).items():
                if key in ("gpu_milli", "cpu_milli", "memory_mb"):
                    setattr(workload, key, int(value))
        view = view_for(workload, attempt=workload.attempt)
        return next(o for o in m.deployment_manifests(view, options_for(workload.pool.cluster))
                    if o["kind"] == "Deployment")["spec"]["template"]

    def observe(self, workload: Workload) -> list[ReplicaState]:
        try:
            clients = clients_for(workload.pool.cluster)
        except ConnectionNotConfigured:
            return []
        pods = current_pods(pods_of(clients, workload), workload, workload.attempt)
        return [pod_view(p).state for p in sorted(pods, key=lambda p: p["metadata"]["name"])]

    def logs(self, workload: Workload, *, replica: int, attempt: int, tail: int | None = None) -> str:
        """The log of the replica's pod (its `main` container). Raises TransientError when the API
        keeps failing; '' when there is no such pod or no connection."""
        try:
            clients = clients_for(workload.pool.cluster)
        except ConnectionNotConfigured:
            return ""
        namespace = namespace_of(workload)
        pod = replica_pod(clients, namespace, workload_id=workload.pk, kind=workload.kind, replica=replica,
                          attempt=attempt)
        if pod is None:
            return ""
        kwargs = {"container": m.CONTAINER}
        if tail is not None:
            kwargs["tail_lines"] = tail
        try:
            return clients.call(clients.core.read_namespaced_pod_log, pod, namespace, text=True, **kwargs)
        except ApiError:
            return ""  # the pod went away in between, or its container has not started yet

    def log_reader(self, workload: Workload, *, replica: int, attempt: int, tail: int | None) -> PodLogReader:
        try:
            clients = clients_for(workload.pool.cluster)
        except ConnectionNotConfigured:
            clients = None
        return PodLogReader(clients=clients, namespace=namespace_of(workload), workload_id=workload.pk,
                            kind=workload.kind, replica=replica, attempt=attempt, tail_lines=tail)


def replica_pod(clients: Clients, namespace: str, *, workload_id: int, kind: str, replica: int,
                attempt: int) -> str | None:
    """The name of the pod of replica `replica` of `attempt` (a Job per attempt; the other kinds have
    one set of pods whatever the attempt), found by the labels the manifests put on pods."""
    data = clients.call(clients.core.list_namespaced_pod, namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload_id}")
    pods = data.get("items") or []
    spec = kind_spec(kind)
    if spec.runs_to_completion:
        pods = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(m.LABEL_ATTEMPT) == str(attempt)]
    pods = sorted(pods, key=lambda p: p["metadata"]["name"])
    # Job pods carry their completion index and StatefulSet pods their ordinal; a Deployment's
    # pods have neither, so its replicas are its pods in name order.
    chosen = pods[replica:replica + 1] if spec.kubernetes_object == "Deployment" else [p for p in pods if pod_view(p).replica == replica]
    return chosen[0]["metadata"]["name"] if chosen else None


LOG_POLL_SECONDS = 1.0  # a followed pod log is asked for at most this often (plus final reads)
_LOG_OVERLAP_SECONDS = 2  # each poll asks for a little more than the time since the last one
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


def _stamp_key(stamp: str) -> tuple[int, int] | None:
    """(epoch seconds, nanoseconds) of an RFC3339(Nano) timestamp as `timestamps=true` prefixes
    each log line with; None when it is not one."""
    match = _STAMP.fullmatch(stamp)
    if match is None:
        return None
    base, fraction, zone = match.groups()
    when = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    return int(when.timestamp()), int((fraction or "").ljust(9, "0"))


class PodLogReader(LogReader):
    """Follows a pod's log by polling the API (the official client's read_namespaced_pod_log):
    first the last `tail_lines` lines, then, at most every LOG_POLL_SECONDS, the lines of the last
    few seconds (`since_seconds`, measured from the previous successful poll with a monotonic
    clock, so the node's clock need not agree with Cairn's) with `timestamps=true`; lines up to
    the last one handed out are dropped by their timestamps, so none comes twice or is lost
    between polls. A pod that is gone (404) is looked up again by its labels: a replaced pod's
    output carries on. API failures read as "nothing new" and the next poll asks again."""

    def __init__(self, *, clients: Clients | None, namespace: str, workload_id: int, kind: str, replica: int,
                 attempt: int, tail_lines: int | None, poll_seconds: float = LOG_POLL_SECONDS):
        super().__init__(workload_id=workload_id, replica=replica, attempt=attempt, tail_lines=tail_lines)
        self._clients, self._namespace, self._kind, self._poll = clients, namespace, kind, poll_seconds
        self._reset()

    def _reset(self) -> None:
        self._pod: str | None = None
        self._polled_at: float | None = None  # monotonic start of the last successful poll
        self._looked_at = float("-inf")
        self._last: tuple[int, int] | None = None  # timestamp of the last line handed out
        self._at_last = 0  # how many lines with exactly that timestamp were handed out
        self._pending = ""

    def read(self, *, final: bool = False) -> str:
        """Blocking HTTP: call it from a worker thread."""
        if not self._pending:
            if not final and time.monotonic() - self._looked_at < self._poll:
                return ""
            self._looked_at = time.monotonic()
            self._pending = self._poll_once()
        chunk, self._pending = self._pending[:LOG_FRAME_CHARS], self._pending[LOG_FRAME_CHARS:]
        return chunk

    def switch(self, attempt: int) -> str:
        self.attempt, self.tail_lines = attempt, None
        self._reset()
        return ""

    def _poll_once(self) -> str:
        if self._clients is None or self.attempt < 1:
            return ""
        clients, started = self._clients, time.monotonic()
        try:
            if self._pod is None:
                self._pod = replica_pod(clients, self._namespace, workload_id=self.workload_id, kind=self._kind,
                                        replica=self.replica, attempt=self.attempt)
                if self._pod is None:
                    return ""
            kwargs: dict = {"container": m.CONTAINER, "timestamps": True}
            if self._polled_at is not None:
                kwargs["since_seconds"] = math.ceil(started - self._polled_at) + _LOG_OVERLAP_SECONDS
            elif self.tail_lines is not None:
                kwargs["tail_lines"] = self.tail_lines
            text = clients.call(clients.core.read_namespaced_pod_log, self._pod, self._namespace, text=True, **kwargs)
        except ApiError as exc:
            if exc.status == 404:
                self._pod = None  # gone or replaced: find the replica's pod again next time
            return ""  # 400 while the container is still being created, ...: ask again later
        except TransientError as exc:
            logger.info("kubernetes: reading the log of %s/%s failed: %s", self._namespace, self._pod, exc)
            return ""
        self._polled_at = started
        return self._new_lines(text)

    def _new_lines(self, text: str) -> str:
        out = []
        old_last, old_count, repeats = self._last, self._at_last, 0
        for line in text.splitlines(keepends=True):
            stamp, _, rest = line.partition(" ")
            key = _stamp_key(stamp)
            if key is None:  # not stamped (should not happen): hand it out as it is
                out.append(line)
                continue
            if old_last is not None:
                if key < old_last:
                    continue
                if key == old_last:
                    repeats += 1
                    if repeats <= old_count:
                        continue
            out.append(rest)
            if key == self._last:
                self._at_last += 1
            else:
                self._last, self._at_last = key, 1
        return "".join(out)


def _scale_up(clients: Clients, manifest: dict) -> None:
    """An adopted StatefulSet / Deployment may be one a stop or a preemption scaled to zero (its
    notebook PVC and Service kept): give it back the admitted replicas and this attempt's pod
    template (new placement, new run Secret)."""
    meta = manifest["metadata"]
    wanted = {"replicas": manifest["spec"]["replicas"], "template": manifest["spec"]["template"]}
    try:
        replace_spec(clients, manifest["kind"], meta["namespace"], meta["name"], lambda spec: spec.update(wanted))
    except ApiError as exc:
        raise LaunchError(f"Kubernetes refused to scale {manifest['kind']} {meta['namespace']}/{meta['name']} back "
                          f"up: {exc.status} {exc.reason}: {exc.message}") from None


def _ready_nodes(clients: Clients, names: set[str]) -> set[str]:
    """Those of `names` whose Node is Ready (a kubelet that answers)."""
    if not names:
        return set()
    ready = set()
    for node in clients.call(clients.core.list_node).get("items") or []:
        name = (node.get("metadata") or {}).get("name")
        if name in names and any(c.get("type") == "Ready" and c.get("status") == "True"
                                 for c in (node.get("status") or {}).get("conditions") or []):
            ready.add(name)
    return ready


def replace_spec(clients: Clients, kind: str, namespace: str, name: str, change, *, tries: int = 3) -> dict:
    """Read a StatefulSet / Deployment, `change(spec)` in place, write the object back whole (PUT
    with the resourceVersion read). Not a patch: the client sends dicts as strategic-merge
    patches, which merge containers and env by name and resource maps key by key, so an env var,
    a GPU limit or a command that the new spec drops would stay in the template. A conflict
    (changed in between, e.g. by its controller's status) is read and changed again."""
    read, replace = {
        "Deployment": (clients.apps.read_namespaced_deployment, clients.apps.replace_namespaced_deployment),
        "StatefulSet": (clients.apps.read_namespaced_stateful_set, clients.apps.replace_namespaced_stateful_set),
    }[kind]
    for attempt in range(tries):
        obj = clients.call(read, name, namespace)
        obj.pop("status", None)  # not written by a PUT of the object (and a partial one fails validation)
        change(obj.setdefault("spec", {}))
        try:
            return clients.call(replace, name, namespace, obj)
        except ApiError as exc:
            if exc.status != 409 or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _ignore_missing(clients: Clients, fn, *args, **kwargs) -> None:
    try:
        clients.call(fn, *args, **kwargs)
    except ApiError as exc:
        if exc.status != 404:
            raise
