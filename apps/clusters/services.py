"""Writes to clusters, pools and nodes."""
import logging
import platform
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass

import psutil
import yaml
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError, ServiceError
from apps.core.realtime import publish

from .accelerators import check_accelerators_config, normalise_arch
from .backends import backend_spec, backend_specs
from .choices import ISOLATION_LABEL, NETWORK_LABEL, AcceleratorType, Backend, CredentialKind, NodeHealth
from .crypto import CredentialsUnreadable, encrypt
from .events import NODE_CHANGES_GROUP, node_changed_event
from .models import Cluster, ClusterCredential, Node, ResourcePool
from .probes import AcceleratorInventory, probe_npu_smi, probe_rocm_smi
from .selectors import cluster_connection

logger = logging.getLogger(__name__)

# The backend that drives a kind of cluster registers how to check its credentials, at
# AppConfig.ready(): credential_probes[backend](connection, timeout=) -> {"ok", "version", "detail"}
# (connection as cluster_connection gives it). clusters sits below backends and may not import it.
credential_probes: dict[str, Callable[..., dict]] = {}


@dataclass(frozen=True)
class GpuInventory:
    count: int = 0
    model: str = ""
    memory_mb: int = 0


def local_gpu_inventory() -> GpuInventory:
    """GPUs of this machine through NVML; none when there is no NVIDIA driver (never raises)."""
    try:
        import pynvml
    except ImportError:
        return GpuInventory()
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver / library: a CPU-only machine
        return GpuInventory()
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return GpuInventory()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        if isinstance(name, bytes):
            name = name.decode()
        memory_mb = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
        return GpuInventory(count=count, model=name, memory_mb=int(memory_mb))
    except Exception as exc:
        logger.warning("NVML is present but could not list the GPUs: %s", exc)
        return GpuInventory()
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def local_accelerator_inventory() -> AcceleratorInventory:
    """This machine's accelerators: NVIDIA GPUs through NVML, else AMD GPUs through `rocm-smi`, else
    Ascend NPUs through `npu-smi` (each only when present); none found: type "none"."""
    gpus = local_gpu_inventory()
    if gpus.count:
        return AcceleratorInventory(type=AcceleratorType.NVIDIA, count=gpus.count, model=gpus.model,
                                    memory_mb=gpus.memory_mb)
    for probe in (probe_rocm_smi, probe_npu_smi):
        found = probe()
        if found.count:
            return found
    return AcceleratorInventory()


def local_cluster_register(*, isolation: str = "", network: str = "") -> Node:
    """Make sure the local cluster, its pool and this machine's node exist and are current.

    Get-or-creates the Cluster (backend local) and ResourcePool named in settings.CAIRN and the
    Node named after this host, with CPU, memory and GPUs measured now; marks it healthy and seen.
    An admin's choices (pool of the node, schedulable, labels) are left alone, except Cairn's own
    label ISOLATION_LABEL: how the process that launches replicas here isolates them (given by
    the local backend, which knows; the dashboard warns when it is "none"), and NETWORK_LABEL
    ("own" or "host": whether workloads get a network of their own; the dashboard warns on "host").
    """
    cpu_milli = (psutil.cpu_count(logical=True) or 1) * 1000
    memory_mb = psutil.virtual_memory().total // (1024 * 1024)
    gpus = local_accelerator_inventory()
    now = timezone.now()
    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(
            name=settings.CAIRN["LOCAL_CLUSTER_NAME"], defaults={"backend": Backend.LOCAL}
        )
        pool, _ = ResourcePool.objects.get_or_create(
            name=settings.CAIRN["LOCAL_POOL_NAME"],
            defaults={"cluster": cluster, "description": "This machine."},
        )
        measured = {
            "cpu_milli_capacity": cpu_milli,
            "cpu_milli_allocatable": cpu_milli,
            "memory_mb_capacity": memory_mb,
            "memory_mb_allocatable": memory_mb,
            "accelerator_type": gpus.type,
            "cpu_arch": normalise_arch(platform.machine()),
            "gpu_count": gpus.count,
            "gpu_model": gpus.model,
            "gpu_memory_mb": gpus.memory_mb,
            "health": NodeHealth.HEALTHY,
        }
        node, created = Node.objects.select_for_update().get_or_create(
            cluster=cluster, name=socket.gethostname(),
            defaults={**measured, "pool": pool, "last_seen_at": now},
        )
        if not created:
            if node.cordon_reason and node.health == NodeHealth.UNHEALTHY:
                measured.pop("health")  # a fault Cairn cordoned for outlives a restart
            changed = [field for field, value in measured.items() if getattr(node, field) != value]
            for field in changed:
                setattr(node, field, measured[field])
            if changed:
                logger.info("node %s: updated %s", node, ", ".join(changed))
            node.last_seen_at = now
            node.save(update_fields=[*changed, "last_seen_at"])
        wanted = {k: v for k, v in ((ISOLATION_LABEL, isolation), (NETWORK_LABEL, network)) if v}
        if any((node.labels or {}).get(k) != v for k, v in wanted.items()):
            node.labels = {**(node.labels or {}), **wanted}
            node.save(update_fields=["labels"])
    return node


def node_cordon(*, node: Node, reason: str, message: str, health: str | None = None) -> Node:
    """Stop placing new workloads on `node` (running ones keep running) and optionally set its
    health. Writes only the fields that change; tells the dashboard's cluster topic after commit
    (also when nothing changed, so a new reason is seen)."""
    with transaction.atomic():
        locked = Node.objects.select_for_update(of=("self",)).select_related("cluster", "pool").get(pk=node.pk)
        changes: dict = {}
        if locked.schedulable:
            changes["schedulable"] = False
        if locked.cordon_reason != reason[:200]:
            changes["cordon_reason"] = reason[:200]
        if health is not None and locked.health != health:
            changes["health"] = health
        if changes:
            Node.objects.filter(pk=locked.pk).update(**changes)
            for field, value in changes.items():
                setattr(locked, field, value)
            logger.warning("node %s cordoned (%s): %s", locked, reason, message)
        publish(NODE_CHANGES_GROUP, node_changed_event(locked, reason=reason, message=message))
    return locked


def node_uncordon(*, node: Node, reason: str = "Uncordoned", message: str = "") -> Node:
    """Take new workloads on `node` again and drop Cairn's hold on it. The administrator who
    uncordons a node Cairn cordoned for a fault vouches for it: its health becomes healthy
    (the backend's next inventory pass reports the truth again)."""
    with transaction.atomic():
        locked = Node.objects.select_for_update(of=("self",)).select_related("cluster", "pool").get(pk=node.pk)
        changes: dict = {"schedulable": True, "cordon_reason": ""}
        if locked.health == NodeHealth.UNHEALTHY and locked.cordon_reason:
            changes["health"] = NodeHealth.HEALTHY
        Node.objects.filter(pk=locked.pk).update(**changes)
        for field, value in changes.items():
            setattr(locked, field, value)
        publish(NODE_CHANGES_GROUP, node_changed_event(locked, reason=reason, message=message or "Node uncordoned."))
    return locked


# -- Kubernetes clusters -------------------------------------------------------------------------

KUBERNETES_CONFIG_KEYS = frozenset({
    "namespace_prefix", "volcano", "volcano_queue", "kueue_queue", "tolerations", "gpu_resource",
    "shared_gpu_resources", "gpu_product_label", "default_image", "notebook_image", "vscode_notebook_image",
    "notebook_storage", "storage_class", "api_url", "image_pull_secrets", "accelerators",
})


def _check_kubernetes_config(config: dict) -> None:
    """Types of the backend options, so a bad value is a 400 now rather than a failed dispatch later."""
    for key in ("volcano",):
        if key in config and not isinstance(config[key], bool):
            raise ServiceError(f"config.{key} must be true or false.")
    for key in ("namespace_prefix", "volcano_queue", "kueue_queue", "gpu_resource", "gpu_product_label",
                "default_image", "notebook_image", "vscode_notebook_image", "notebook_storage", "storage_class",
                "api_url"):
        if key in config and not isinstance(config[key], str):
            raise ServiceError(f"config.{key} must be a string.")
    prefix = config.get("namespace_prefix")
    if prefix is not None and not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,20})?", prefix):
        raise ServiceError("config.namespace_prefix must be at most 21 lowercase letters, digits and '-', "
                           "starting with a letter or digit.")
    tolerations = config.get("tolerations", [])
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise ServiceError("config.tolerations must be a list of Kubernetes tolerations (objects).")
    secrets_ = config.get("image_pull_secrets", [])
    if not isinstance(secrets_, list) or not all(isinstance(n, str) and n for n in secrets_):
        raise ServiceError("config.image_pull_secrets must be a list of Secret names.")
    if "accelerators" in config and (problem := check_accelerators_config(config["accelerators"])):
        raise ServiceError(problem)
    shared = config.get("shared_gpu_resources", {})
    if not isinstance(shared, dict) or not all(
            isinstance(k, str) and v in ("one", "percent", "milli") for k, v in shared.items()):
        raise ServiceError('config.shared_gpu_resources maps resource names to "one", "percent" or "milli".')


def _parse_kubeconfig(text: str, context: str) -> tuple[dict, str]:
    """The kubeconfig as a dict and the API server it points at; ServiceError when unusable."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ServiceError("The kubeconfig is not valid YAML.") from None
    if not isinstance(data, dict) or not data.get("clusters") or not data.get("contexts"):
        raise ServiceError("The kubeconfig has no clusters or contexts.")
    contexts = {c.get("name"): c.get("context") or {} for c in data.get("contexts") or [] if isinstance(c, dict)}
    chosen = context or data.get("current-context")
    if chosen not in contexts:
        raise ServiceError(f"The kubeconfig has no context '{chosen}'." if chosen else
                           "The kubeconfig names no current-context; say which context to use.")
    clusters = {c.get("name"): c.get("cluster") or {} for c in data.get("clusters") or [] if isinstance(c, dict)}
    server = (clusters.get(contexts[chosen].get("cluster")) or {}).get("server")
    if not server:
        raise ServiceError(f"Context '{chosen}' points at no cluster with a server address.")
    return data, server


def cluster_register(*, name: str, backend: str, config: dict | None = None) -> Cluster:
    """Register (or update the config of) a cluster of any backend: the config is checked by the
    backend's declared spec (BackendSpec.check_config). A cluster of that name with another
    backend is a conflict (409). The Django admin checks a config the same way (apps/clusters/forms.py)."""
    spec = backend_spec(backend)
    if backend not in {s.name for s in backend_specs()}:
        raise ServiceError(f"Unknown backend '{backend}': this installation has "
                           f"{', '.join(s.name for s in backend_specs())}.")
    try:
        config = spec.check_config(dict(config or {}))
    except ValueError as exc:
        raise ServiceError(str(exc)) from None
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(name=name).first()
        if cluster is None:
            return Cluster.objects.create(name=name, backend=backend, config=config)
        if cluster.backend != backend:
            raise ConflictError(f"Cluster '{name}' exists and uses the {cluster.backend} backend.")
        cluster.config = config
        cluster.save(update_fields=["config"])
    return cluster


def kubernetes_cluster_register(
    *, name: str, kubeconfig: str = "", in_cluster: bool = False, context: str = "", config: dict | None = None,
) -> Cluster:
    """Register (or re-register) a Kubernetes cluster with its credentials, encrypted at rest.

    Either a kubeconfig (YAML text; `context` picks one, default its current-context) or
    `in_cluster` (the service account of the pod Cairn runs in). `config` holds the non-secret
    backend options (Volcano, Kueue queue, namespace prefix, ...; see docs/kubernetes.md).
    """
    if bool(kubeconfig) == bool(in_cluster):
        raise ServiceError("Give either a kubeconfig or in_cluster=true.")
    config = dict(config or {})
    unknown = sorted(set(config) - KUBERNETES_CONFIG_KEYS)
    if unknown:
        raise ServiceError(f"Unknown cluster config key(s): {', '.join(unknown)}.")
    _check_kubernetes_config(config)
    server = ""
    encrypted = ""
    if kubeconfig:
        _, server = _parse_kubeconfig(kubeconfig, context)
        encrypted = encrypt(kubeconfig)
    source = CredentialKind.IN_CLUSTER if in_cluster else CredentialKind.KUBECONFIG
    with transaction.atomic():
        cluster = cluster_register(name=name, backend=Backend.KUBERNETES, config=config)
        ClusterCredential.objects.update_or_create(
            cluster=cluster,
            defaults={"source": source, "encrypted_kubeconfig": encrypted, "context": context, "server": server,
                      "checked_at": None, "check_ok": None, "check_detail": ""},
        )
        # What was set, never what it contains: no kubeconfig, token or key in the log.
        audit_record(action=AuditAction.CLUSTER_CREDENTIALS_CHANGE, target=cluster,
                     details={"source": source, "server": server, "context": context, "config_keys": sorted(config)})
    logger.info("cluster %s registered (%s)", name, source)
    return cluster


def kubernetes_cluster_check(*, cluster: Cluster, timeout: float = 10.0) -> ClusterCredential:
    """Ask the cluster's API server for its version with the stored credentials; record the answer."""
    probe = credential_probes.get(cluster.backend)
    if probe is None:
        raise ServiceError(f"Cluster '{cluster.name}' is not a Kubernetes cluster: its backend ({cluster.backend}) "
                           "has no credentials to check.")
    credential = ClusterCredential.objects.filter(cluster=cluster).first()
    if credential is None:
        raise ServiceError(f"Cluster '{cluster.name}' has no registered credentials.")
    try:
        result = probe(cluster_connection(cluster=cluster), timeout=timeout)
    except CredentialsUnreadable as exc:
        result = {"ok": False, "version": "", "detail": str(exc)}
    detail = result["detail"] + (f" Kubernetes {result['version']}." if result.get("version") else "")
    ClusterCredential.objects.filter(pk=credential.pk).update(
        checked_at=timezone.now(), check_ok=result["ok"], check_detail=detail,
    )
    credential.refresh_from_db()
    return credential
