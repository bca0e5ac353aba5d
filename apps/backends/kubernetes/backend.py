"""The Kubernetes backend: realise a workload as objects, stop it, observe its pods, read logs.

Like every backend it never writes workload status (apps.backends.services and the reconciler
in .reconciler do). Dispatch is idempotent: every object has a deterministic name, and a 409
AlreadyExists is answered by reading the object back and adopting it when its labels say it is
this workload's (otherwise a clear LaunchError: Cairn never takes over someone else's object).
Transient API failures (5xx, 429, timeouts) are retried with backoff in client.Clients.call and
then raised as TransientError, which leaves the workload ADMITTED for the task's own retry.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from apps.backends.base import Backend, LaunchError, ReplicaState
from apps.tracking import services as tracking_services
from apps.workloads.deadlines import seconds_left

from . import manifests as m
from .client import ApiError, Clients, ConnectionNotConfigured, clients_for, kube_settings
from .status import pod_view

if TYPE_CHECKING:
    from apps.clusters.models import Cluster
    from apps.workloads.models import Workload

PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")


def options_for(cluster: Cluster) -> m.ClusterOptions:
    """settings.CAIRN_KUBERNETES, overridden by the cluster's own config."""
    base = kube_settings()
    config = cluster.config or {}
    api_url = config.get("api_url") or base["API_URL"] or settings.CAIRN["PUBLIC_URL"]
    return m.ClusterOptions(
        namespace_prefix=config.get("namespace_prefix", base["NAMESPACE_PREFIX"]),
        gpu_resource=config.get("gpu_resource", base["GPU_RESOURCE"]),
        shared_gpu_resources=dict(config.get("shared_gpu_resources") or base["SHARED_GPU_RESOURCES"]),
        gpu_product_label=config.get("gpu_product_label", base["GPU_PRODUCT_LABEL"]),
        tolerations=tuple(config.get("tolerations") or ()),
        volcano=bool(config.get("volcano", False)),
        volcano_queue=config.get("volcano_queue", "default"),
        kueue_queue=config.get("kueue_queue", ""),
        default_image=config.get("default_image", base["DEFAULT_IMAGE"]),
        notebook_image=config.get("notebook_image", base["NOTEBOOK_IMAGE"]),
        notebook_storage=config.get("notebook_storage", base["NOTEBOOK_STORAGE"]),
        storage_class=config.get("storage_class", ""),
        api_url=api_url,
        image_pull_secrets=tuple(config.get("image_pull_secrets") or ()),
    )


def notebook_token(workload_id: int) -> str:
    """Deterministic per workload, so a redelivered dispatch computes the same Secret."""
    return hmac.new(settings.SECRET_KEY.encode(), f"cairn-notebook:{workload_id}".encode(), hashlib.sha256).hexdigest()[:40]


def view_for(workload: Workload, *, attempt: int, run_env: dict | None = None) -> m.WorkloadView:
    return m.WorkloadView(
        id=workload.pk, kind=workload.kind, name=workload.name, project=workload.project.slug, attempt=attempt,
        replicas=workload.replicas, gpu_milli=workload.gpu_milli, cpu_milli=workload.cpu_milli,
        memory_mb=workload.memory_mb, spec=dict(workload.spec or {}), gpu_model=workload.gpu_model,
        pool_node_selector=dict(workload.pool.node_selector or {}),
        placement_nodes=tuple(p["node"] for p in (workload.placement or []) if isinstance(p, dict) and p.get("node")),
        notebook_token=notebook_token(workload.pk) if workload.kind == "notebook" else "",
        run_env=dict(run_env or {}),
        active_deadline_seconds=_active_deadline(workload),
    )


def _active_deadline(workload: Workload) -> int | None:
    """The Job's activeDeadlineSeconds: the whole limit for the first attempt of an admission,
    what is left of it for a restart (restarts count against the limit; deadlines.py)."""
    if workload.kind != "training":
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
    }
    if kind == "Namespace":
        return (lambda ns, body, **kw: c.create_namespace(body, **kw), lambda ns, name, **kw: c.read_namespace(name, **kw))
    if kind == "PodGroup":
        group, version, plural = PODGROUPS
        return (lambda ns, body, **kw: x.create_namespaced_custom_object(group, version, ns, plural, body, **kw),
                lambda ns, name, **kw: x.get_namespaced_custom_object(group, version, ns, plural, name, **kw))
    create, read = namespaced[kind]
    return (lambda ns, body, **kw: create(ns, body, **kw), lambda ns, name, **kw: read(name, ns, **kw))


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


def ensure(clients: Clients, manifest: dict) -> str:
    """Create the object, or adopt the existing one when it is ours. Returns "created" / "adopted"."""
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    namespace = manifest["metadata"].get("namespace", "")
    try:
        _call_create(clients, manifest)
        return "created"
    except ApiError as exc:
        if exc.status != 409:
            raise LaunchError(f"Kubernetes refused to create {kind} {namespace}/{name}: {exc.status} {exc.reason}: "
                              f"{exc.message}") from None
    existing = _call_read(clients, kind, namespace, name)
    if _owned_by(existing, manifest):
        return "adopted"
    where = f" in namespace {namespace}" if namespace else ""
    raise LaunchError(
        f"A {kind} named '{name}'{where} already exists and does not belong to this workload (its labels differ); "
        "Cairn will not take it over. Delete or rename it, then start the workload again."
    )


def pods_of(clients: Clients, workload: Workload) -> list[dict]:
    data = clients.call(clients.core.list_namespaced_pod, namespace_of(workload),
                        label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}")
    return data.get("items") or []


def current_pods(pods: list[dict], workload: Workload, attempt: int) -> list[dict]:
    """Pods of the given attempt (training); every pod of the workload for the other kinds."""
    if workload.kind != "training":
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

    def launch(self, workload: Workload, *, attempt: int) -> dict:
        clients = self._clients(workload)
        cluster = workload.pool.cluster
        options = options_for(cluster)
        # Tracking: the run of this attempt and a write-only token for cairn.init() in the job.
        run_env = tracking_services.run_env_for_attempt(workload=workload, attempt=attempt)
        view = view_for(workload, attempt=attempt, run_env=run_env)
        namespace = m.namespace_for(view.project, options)
        ensure(clients, m.namespace_manifest(view.project, options))
        objects = []
        for manifest in m.workload_manifests(view, options):
            outcome = ensure(clients, manifest)
            if outcome == "adopted" and manifest["kind"] in ("StatefulSet", "Deployment"):
                _scale_up(clients, manifest)
            objects.append({"kind": manifest["kind"], "name": manifest["metadata"]["name"], "outcome": outcome})
        runtime: dict = {
            "backend": self.name, "attempt": attempt, "namespace": namespace, "objects": objects,
            "alive": True, "replicas": [],
        }
        if workload.kind == "training":
            runtime["job"] = m.job_name(workload.pk, attempt)
        elif workload.kind == "notebook":
            runtime.update(url=f"http://{m.object_name(workload.pk)}.{namespace}.svc:{m.NOTEBOOK_PORT}"
                               f"/notebooks/{workload.pk}/", token=view.notebook_token)
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
        if force:
            for pod in alive:
                _ignore_missing(clients, clients.core.delete_namespaced_pod, pod["metadata"]["name"], namespace,
                                grace_period_seconds=0)
            return len(alive)
        name = m.object_name(workload.pk)
        if workload.kind == "training":
            job = runtime.get("job") or m.job_name(workload.pk, workload.attempt)
            _ignore_missing(clients, clients.batch.delete_namespaced_job, job, namespace,
                            propagation_policy="Background")
            if options_for(workload.pool.cluster).volcano:
                _ignore_missing(clients, lambda n, ns, **kw: clients.custom.delete_namespaced_custom_object(
                    *PODGROUPS[:2], ns, PODGROUPS[2], n, **kw), job, namespace)
        elif workload.kind == "notebook":
            _ignore_missing(clients, clients.apps.patch_namespaced_stateful_set, name, namespace,
                            {"spec": {"replicas": 0}})
        else:
            # With the Deployment at zero the HPA stands still (it never scales up from zero).
            _ignore_missing(clients, clients.apps.patch_namespaced_deployment, name, namespace,
                            {"spec": {"replicas": 0}})
        return len(alive)

    def observe(self, workload: Workload) -> list[ReplicaState]:
        try:
            clients = clients_for(workload.pool.cluster)
        except ConnectionNotConfigured:
            return []
        pods = current_pods(pods_of(clients, workload), workload, workload.attempt)
        return [pod_view(p).state for p in sorted(pods, key=lambda p: p["metadata"]["name"])]

    def logs(self, workload: Workload, *, replica: int, attempt: int, tail: int | None = None) -> str:
        try:
            clients = clients_for(workload.pool.cluster)
        except ConnectionNotConfigured:
            return ""
        pods = current_pods(pods_of(clients, workload), workload, attempt)
        pods = sorted(pods, key=lambda p: p["metadata"]["name"])
        chosen = [p for p in pods if pod_view(p).replica == replica] if workload.kind != "deployment" else pods[
            replica:replica + 1]
        if not chosen:
            return ""
        kwargs = {"container": m.CONTAINER}
        if tail:
            kwargs["tail_lines"] = tail
        try:
            text = clients.call(clients.core.read_namespaced_pod_log, chosen[0]["metadata"]["name"],
                                namespace_of(workload), **kwargs)
        except ApiError:
            return ""
        return text if isinstance(text, str) else ""


def _scale_up(clients: Clients, manifest: dict) -> None:
    """An adopted StatefulSet / Deployment may be one a stop or a preemption scaled to zero (its
    notebook PVC and Service kept): give it back the admitted replicas and this attempt's pod
    template (new placement, new run Secret)."""
    meta = manifest["metadata"]
    patch = {"spec": {"replicas": manifest["spec"]["replicas"], "template": manifest["spec"]["template"]}}
    fn = (clients.apps.patch_namespaced_stateful_set if manifest["kind"] == "StatefulSet"
          else clients.apps.patch_namespaced_deployment)
    try:
        clients.call(fn, meta["name"], meta["namespace"], patch)
    except ApiError as exc:
        raise LaunchError(f"Kubernetes refused to scale {manifest['kind']} {meta['namespace']}/{meta['name']} back "
                          f"up: {exc.status} {exc.reason}: {exc.message}") from None


def _ignore_missing(clients: Clients, fn, *args, **kwargs) -> None:
    try:
        clients.call(fn, *args, **kwargs)
    except ApiError as exc:
        if exc.status != 404:
            raise
