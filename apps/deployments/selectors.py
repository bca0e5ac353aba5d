"""Reads of the deployments app: keys, the gateway's view of a deployment, its public URL."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.db.models import QuerySet

from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.models import Workload

from .models import KEY_PREFIX, DeploymentKey


def deployment_gateway_url(workload: Workload) -> str | None:
    """Where clients call the deployment through Cairn: `<CAIRN_PUBLIC_URL>/serve/<project>/<name>/`
    (None for other kinds). For the workload API's typed `endpoint` field."""
    if workload.kind != Kind.DEPLOYMENT:
        return None
    return gateway_url(project=workload.project.slug, name=workload.name)


def gateway_url(*, project: str, name: str) -> str:
    base = settings.CAIRN["PUBLIC_URL"].rstrip("/")
    return f"{base}/serve/{quote(project, safe='')}/{quote(name, safe='')}/"


def deployment_keys(*, workload: Workload) -> QuerySet[DeploymentKey]:
    return DeploymentKey.objects.filter(workload=workload).select_related("created_by")


def deployment_key_find(key: str) -> DeploymentKey | None:
    """The DeploymentKey (active or not) whose prefix and secret match the full key string."""
    if not key.startswith(KEY_PREFIX):
        return None
    prefix, _, secret = key[len(KEY_PREFIX):].partition("_")
    if not prefix or not secret:
        return None
    found = DeploymentKey.objects.select_related("workload").filter(prefix=prefix).first()
    if found is None or not found.matches(secret):
        return None
    return found


@dataclass(frozen=True)
class Target:
    """One way into a replica: a unix socket (sandboxed local replica) or an HTTP base URL."""

    key: str  # identifies the replica for load balancing
    socket: str | None = None
    url: str | None = None


def deployment_targets(workload: Workload) -> list[Target]:
    """The replicas the gateway may send requests to: none unless the deployment is running."""
    runtime = workload.runtime or {}
    if workload.status != WorkloadStatus.RUNNING or not runtime.get("alive", True):
        return []
    attempt = runtime.get("attempt")
    targets = []
    for record in runtime.get("replicas") or []:
        if not isinstance(record, dict):
            continue
        ident = f"{workload.pk}/{attempt}/{record.get('replica')}"
        if record.get("socket"):
            targets.append(Target(key=ident, socket=str(record["socket"])))
        elif record.get("port"):
            targets.append(Target(key=ident, url=f"http://127.0.0.1:{int(record['port'])}"))
    if not targets and runtime.get("backend") == "kubernetes" and runtime.get("url"):
        # One Service in front of the pods; Kubernetes spreads the connections.
        targets.append(Target(key=f"{workload.pk}/{attempt}/service", url=str(runtime["url"]).rstrip("/")))
    return targets
