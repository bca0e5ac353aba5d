"""API clients for a registered cluster, and one way to call the API: timeouts on every request,
retries with exponential backoff on 5xx, 429 and network errors / timeouts, raw JSON bodies.

Errors callers see:
- TransientError: the API kept failing with 5xx / 429 / timeouts after the retries (try later);
- ApiError: the API answered with a 4xx (status, reason, message: a permanent answer);
- ConnectionNotConfigured: no usable credentials for the cluster.
"""
from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson
import urllib3
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.watch.watch import iter_resp_lines

from apps.backends.base import TransientBackendError
from apps.clusters.crypto import CredentialsUnreadable
from apps.clusters.models import ClusterCredential
from apps.clusters.selectors import cluster_connection

logger = logging.getLogger(__name__)


class ConnectionNotConfigured(Exception):
    pass


class TransientError(TransientBackendError):
    """5xx, 429 or a timeout that outlasted the retries: the same request may work later."""


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class Gone(ApiError):
    """410: the resourceVersion a watch resumed from is too old; list again."""


# Defaults of settings.CAIRN_KUBERNETES (config/settings/base.py reads them from the environment).
DEFAULTS = {
    "GPU_RESOURCE": "nvidia.com/gpu",
    "SHARED_GPU_RESOURCES": {"nvidia.com/gpu": "one"},
    "GPU_PRODUCT_LABEL": "nvidia.com/gpu.product",
    "NAMESPACE_PREFIX": "cairn-",
    "DEFAULT_IMAGE": "python:3.12-slim",
    "NOTEBOOK_IMAGE": "quay.io/jupyter/base-notebook:latest",
    "VSCODE_NOTEBOOK_IMAGE": "cairn-notebook:4.100.3",
    "NOTEBOOK_STORAGE": "10Gi",
    "API_URL": "",
    "CONNECT_TIMEOUT": 5.0,
    "REQUEST_TIMEOUT": 15.0,
    "RETRIES": 3,
    "RETRY_BACKOFF": 0.5,
    "RETRY_BACKOFF_MAX": 8.0,
    "WATCH_TIMEOUT": 60,
    # Reconciler at scale (docs/kubernetes.md, "At scale"): a full pass over every workload from
    # the caches this often (between them only what changed is looked at); the informers list
    # everything again from the API this often, PAGE_SIZE objects a request; a running training
    # job's health (hangs, stragglers, bad nodes) is looked at this often.
    "RESYNC_SECONDS": 300.0,
    "RELIST_SECONDS": 1800.0,
    "PAGE_SIZE": 500,
    "HEALTH_CHECK_SECONDS": 30.0,
    # One active reconciler per cluster: a coordination.k8s.io Lease (leader.py) in
    # LEASE_NAMESPACE ("": CAIRN_NAMESPACE) of each cluster.
    "LEADER_ELECTION": True,
    "LEASE_NAME": "cairn-reconciler",
    "LEASE_NAMESPACE": "",
    "LEASE_SECONDS": 15.0,
    "RENEW_DEADLINE_SECONDS": 10.0,
    "LEASE_RETRY_SECONDS": 2.0,
    "DEADLINE_BACKSTOP_SECONDS": 120.0,
    # How Cairn's notebook proxy reaches a notebook's Service (docs/kubernetes.md, "Notebooks"):
    # "dns" (Cairn runs in the cluster), "apiserver" (the API server's service proxy), or "auto":
    # dns for an in-cluster connection, else apiserver.
    "NOTEBOOK_ROUTE": "auto",
    # Isolation (manifests.network_policies): a default-deny NetworkPolicy per project namespace
    # with Cairn's paths let through; Cairn's namespace; Cairn's addresses when it runs outside
    # the cluster; what else pods may reach (CIDRs, e.g. ["0.0.0.0/0"]).
    "NETWORK_POLICIES": True,
    "CAIRN_NAMESPACE": "cairn-system",
    "CAIRN_CIDRS": [],
    "EGRESS_CIDRS": [],
    # A finished workload's objects (Job and its pods' logs, Services, checkpoint claim, ...) are
    # deleted this long after it ended; its Secrets (run tokens, dataset credentials) at once.
    "RETENTION_SECONDS": 86400.0,
    # Pods a controller keeps failing to create (FailedCreate: Pod Security, quota, ...) fail the
    # workload, releasing its quota, after this long.
    "POD_CREATE_TIMEOUT_SECONDS": 300.0,
    # A node not Ready (Unknown: its kubelet is silent) this long is unhealthy, and the training
    # pods on it are requeued elsewhere as a disruption.
    "NODE_LOST_GRACE_SECONDS": 60.0,
    # Each container's disk on its node (ephemeral-storage limit; "" for none), and Cairn's
    # priorities as the cluster's PriorityClass names ({"P0": "...", ..., "P5": "..."}; none: unset).
    "EPHEMERAL_STORAGE": "50Gi",
    "PRIORITY_CLASSES": {},
}

# Provisioners whose volumes are ReadWriteOnce only (block devices, node-local paths): a
# multi-replica training job's checkpoint claim (ReadWriteMany) stays Pending with them.
RWO_ONLY_PROVISIONERS = frozenset({
    "kubernetes.io/aws-ebs", "ebs.csi.aws.com", "kubernetes.io/gce-pd", "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk", "disk.csi.azure.com", "rancher.io/local-path", "kubernetes.io/no-provisioner",
    "hostpath.csi.k8s.io", "k8s.io/minikube-hostpath", "openebs.io/local", "topolvm.io", "kubernetes.io/cinder",
    "cinder.csi.openstack.org", "driver.longhorn.io",
})
RWX_PROVISIONERS = frozenset({
    "efs.csi.aws.com", "file.csi.azure.com", "kubernetes.io/azure-file", "filestore.csi.storage.gke.io",
    "nfs.csi.k8s.io", "cephfs.csi.ceph.com", "k8s-sigs.io/nfs-subdir-external-provisioner",
    "spectrumscale.csi.ibm.com", "csi.weka.io", "lustre.csi.aws.com",
})


def storage_report(classes: list[dict]) -> tuple[str, str]:
    """(the default StorageClass's name or "", a sentence for the administrator) from the cluster's
    StorageClasses: which class claims without one get, and whether it is known to offer
    ReadWriteMany (multi-replica checkpoints, project volumes) — Kubernetes does not say."""
    default = next((c for c in classes if ((c.get("metadata") or {}).get("annotations") or {}).get(
        "storageclass.kubernetes.io/is-default-class") == "true"), None)
    names = ", ".join(sorted((c.get("metadata") or {}).get("name", "") for c in classes)) or "none"
    if default is None:
        return "", (f"Storage: no default StorageClass (classes: {names}); claims without a storage_class stay "
                    "Pending: set the cluster's storage_class (and checkpoint_claim for multi-replica training).")
    name, provisioner = default["metadata"]["name"], default.get("provisioner", "")
    if provisioner in RWO_ONLY_PROVISIONERS:
        modes = "ReadWriteOnce only: multi-replica training checkpoints and project volumes (ReadWriteMany) " \
                "will stay Pending; set checkpoint_claim / volume_storage_class to a ReadWriteMany class"
    elif provisioner in RWX_PROVISIONERS:
        modes = "ReadWriteMany supported"
    else:
        modes = "ReadWriteMany unknown for this provisioner: check it before running multi-replica training"
    return name, f"Storage: default StorageClass {name} ({provisioner}): {modes}. Classes: {names}."


def kube_settings() -> dict:
    return {**DEFAULTS, **getattr(settings, "CAIRN_KUBERNETES", {})}


def _opt(name: str):
    return kube_settings()[name]


def _api_error(exc: k8s.ApiException) -> ApiError:
    reason, message = exc.reason or "", ""
    try:
        body = json.loads(exc.body or "{}")
        reason, message = body.get("reason") or reason, body.get("message") or ""
    except (TypeError, ValueError):
        message = str(exc.body or "")[:500]
    cls = Gone if exc.status == 410 else ApiError
    return cls(int(exc.status or 0), reason, message)


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


@dataclass
class Clients:
    """Typed API groups over one ApiClient (one connection pool)."""

    api: k8s.ApiClient

    def __post_init__(self):
        self.core = k8s.CoreV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        self.autoscaling = k8s.AutoscalingV2Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.version = k8s.VersionApi(self.api)
        self.networking = k8s.NetworkingV1Api(self.api)
        self.rbac = k8s.RbacAuthorizationV1Api(self.api)
        self.authentication = k8s.AuthenticationV1Api(self.api)
        self.authorization = k8s.AuthorizationV1Api(self.api)
        self.storage = k8s.StorageV1Api(self.api)
        self.coordination = k8s.CoordinationV1Api(self.api)
        self.username: str | None = None  # who the API server says Cairn is (SelfSubjectReview), once asked

    def call(self, fn: Callable, *args, retries: int | None = None, text: bool = False, **kwargs) -> dict | str:
        """Call an API method; return the parsed JSON body (or text). Retries transient failures.

        text=True returns the body as text, never parsed: a pod log whose output happens to be
        JSON ("42", a JSON line) is still the log."""
        retries = _opt("RETRIES") if retries is None else retries
        kwargs.setdefault("_request_timeout", (_opt("CONNECT_TIMEOUT"), _opt("REQUEST_TIMEOUT")))
        kwargs["_preload_content"] = False
        last: Exception | None = None
        for attempt in range(retries + 1):
            if attempt:
                delay = min(_opt("RETRY_BACKOFF") * 2 ** (attempt - 1), _opt("RETRY_BACKOFF_MAX"))
                time.sleep(delay * (0.5 + random.random() / 2))
            try:
                response = fn(*args, **kwargs)
                raw = response.data
                if text:
                    return (raw.decode(errors="replace") if isinstance(raw, bytes) else raw) or ""
                # orjson straight from the bytes: a page of 500 pods is megabytes (kube_scale)
                try:
                    return orjson.loads(raw) if raw else {}
                except orjson.JSONDecodeError:
                    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
            except k8s.ApiException as exc:
                if not _retryable(int(exc.status or 0)):
                    raise _api_error(exc) from None
                last = exc
            except urllib3.exceptions.HTTPError as exc:  # timeouts, refused connections, resets
                last = exc
            logger.info("kubernetes: %s failed (%s), attempt %s of %s", getattr(fn, "__name__", fn), last,
                        attempt + 1, retries + 1)
        raise TransientError(f"The Kubernetes API kept failing: {_describe(last)}") from last

    def stream(self, fn: Callable, *args, timeout_seconds: int, **kwargs) -> Iterator[dict]:
        """A watch: yields {"type", "object"} events; raises Gone on 410, ApiError on others."""
        try:
            response = fn(*args, watch=True, timeout_seconds=timeout_seconds, _preload_content=False,
                          _request_timeout=(_opt("CONNECT_TIMEOUT"), timeout_seconds + 10), **kwargs)
        except k8s.ApiException as exc:
            raise _api_error(exc) from None
        try:
            for line in iter_resp_lines(response):
                if not line:
                    continue
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    cls = Gone if status.get("code") == 410 else ApiError
                    raise cls(int(status.get("code") or 0), status.get("reason", ""), status.get("message", ""))
                yield event
        finally:
            response.close()
            response.release_conn()


def _describe(exc: Exception | None) -> str:
    if isinstance(exc, k8s.ApiException):
        return f"HTTP {exc.status} {exc.reason or ''}".strip()
    return type(exc).__name__ if exc else "unknown error"


_cache: dict[int, tuple[str, Clients]] = {}
_cache_lock = threading.Lock()


def configuration_from(connection: dict) -> k8s.Configuration:
    configuration = k8s.Configuration()
    try:
        if connection.get("in_cluster"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config_from_dict(
                connection["kubeconfig"], context=connection.get("context"), client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, KeyError, TypeError, ValueError) as exc:
        raise ConnectionNotConfigured(f"The cluster's credentials are not usable: {exc}") from None
    configuration.retries = 0  # retries are ours (Clients.call), with backoff
    return configuration


def clients_for(cluster) -> Clients:
    """Clients for a registered cluster, cached until its credentials change."""

    try:
        connection = cluster_connection(cluster=cluster)
    except ClusterCredential.DoesNotExist:
        raise ConnectionNotConfigured(f"Cluster '{cluster.name}' has no registered credentials.") from None
    except CredentialsUnreadable as exc:
        raise ConnectionNotConfigured(str(exc)) from None
    with _cache_lock:
        cached = _cache.get(cluster.pk)
        if cached and cached[0] == connection["version"]:
            return cached[1]
    clients = Clients(k8s.ApiClient(configuration_from(connection)))
    with _cache_lock:
        _cache[cluster.pk] = (connection["version"], clients)
    return clients


def check_connectivity(connection: dict, *, timeout: float = 10.0) -> dict:
    """Ask the API server for its version with the given connection: {"ok", "version", "detail"}."""
    try:
        clients = Clients(k8s.ApiClient(configuration_from(connection)))
        version = clients.call(clients.version.get_code, retries=1, _request_timeout=(timeout, timeout))
        try:  # the storage preflight: a warning in the detail, never a failed check
            classes = clients.call(clients.storage.list_storage_class, retries=1, _request_timeout=(timeout, timeout))
            storage = storage_report(classes.get("items") or [])[1]
        except (ApiError, TransientError) as exc:
            storage = f"Storage: StorageClasses could not be listed ({exc})."
        return {"ok": True, "version": version.get("gitVersion", ""), "detail": f"Connected. {storage}"}
    except ConnectionNotConfigured as exc:
        return {"ok": False, "version": "", "detail": str(exc)}
    except ApiError as exc:
        return {"ok": False, "version": "", "detail": f"The API server answered {exc.status} {exc.reason}."}
    except TransientError as exc:
        return {"ok": False, "version": "", "detail": str(exc)}
