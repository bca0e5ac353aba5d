"""Reads of the deployments app: keys, the gateway's view of a deployment, its public URL."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.db.models import QuerySet

from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.models import Workload

from .models import KEY_PREFIX, DeploymentKey, DeploymentRevision, DeploymentRollout


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
    replica: int | None = None  # its number (None: a Kubernetes Service in front of the pods)
    revision: int | None = None  # the deployment revision it runs
    socket: str | None = None
    url: str | None = None


def deployment_targets(workload: Workload) -> list[Target]:
    """The replicas the gateway may send requests to: the ready ones of a running deployment."""
    runtime = workload.runtime or {}
    if workload.status != WorkloadStatus.RUNNING or not runtime.get("alive", True):
        return []
    attempt = runtime.get("attempt")
    targets = []
    for record in runtime.get("replicas") or []:
        if not isinstance(record, dict) or not record.get("ready"):
            continue  # not ready (yet): its readiness GET has not succeeded
        # With the process id: a replica started again at the same index (a restart, a new revision)
        # is another target, so no kept-alive connection to the one it replaced is reused.
        ident = f"{workload.pk}/{attempt}/{record.get('replica')}/{record.get('pid')}"
        if record.get("socket"):
            targets.append(Target(key=ident, replica=record.get("replica"), revision=record.get("revision"),
                                  socket=str(record["socket"])))
        elif record.get("port"):
            targets.append(Target(key=ident, replica=record.get("replica"), revision=record.get("revision"),
                                  url=f"http://127.0.0.1:{int(record['port'])}"))
    if not targets and runtime.get("backend") == "kubernetes" and runtime.get("url"):
        # One Service in front of the pods; Kubernetes spreads the connections.
        targets.append(Target(key=f"{workload.pk}/{attempt}/service", url=str(runtime["url"]).rstrip("/")))
    return targets


def deployment_revision_plan(workload: Workload) -> tuple[int, int, dict[int, tuple[int, dict]]]:
    """KindSpec.revision_plan: the revision each replica should run, and its spec."""
    rollout = DeploymentRollout.objects.filter(workload=workload).first()
    if rollout is None:
        return 1, 1, {}
    specs = dict(DeploymentRevision.objects.filter(
        workload=workload, number__in={rollout.stable_revision, rollout.canary_revision} - {None},
    ).values_list("number", "spec"))
    plan = {}
    for replica in range(workload.replicas):
        number = rollout.revision_of(replica, workload.replicas)
        plan[replica] = (number, {**(workload.spec or {}), **specs.get(number, {})})
    # Unavailable replicas are counted against all of them, surge included: with `surge` extra
    # replicas admitted, `max_unavailable + surge` of them may be missing or not ready while the
    # deployment keeps its own number minus max_unavailable ready (0 with max_unavailable 0 and no
    # surge admitted yet: the rollout waits for its surge).
    return rollout.max_unavailable + rollout.surge, rollout.stable_revision, plan


def deployment_revisions(*, workload: Workload) -> QuerySet[DeploymentRevision]:
    return DeploymentRevision.objects.filter(workload=workload).select_related("created_by")


def deployment_rollout_status(*, workload: Workload) -> dict:
    """Which revision each replica runs and whether the rollout is complete (for the API and CLI)."""
    workload.refresh_from_db(fields=["runtime", "replicas"])
    rollout = DeploymentRollout.objects.filter(workload=workload).first() or DeploymentRollout(workload=workload)
    records = {r.get("replica"): r for r in (workload.runtime or {}).get("replicas", []) if isinstance(r, dict)}
    replicas = []
    complete = True
    for replica in range(workload.replicas):
        record = records.get(replica) or {}
        wanted = rollout.revision_of(replica, workload.replicas)
        revision = record.get("revision")
        ready = bool(record.get("ready"))
        complete = complete and ready and (revision or rollout.stable_revision) == wanted
        replicas.append({"replica": replica, "revision": revision, "ready": ready,
                         "surge": replica >= workload.replicas - rollout.surge})
    # A surge still wanted: the canary has no replica yet, or the rolling update has not ended.
    complete = complete and rollout.surge_wanted <= rollout.surge and not (
        rollout.surge and rollout.canary_revision is None)
    return {"stable_revision": rollout.stable_revision, "canary_revision": rollout.canary_revision,
            "canary_weight": rollout.canary_weight, "max_unavailable": rollout.max_unavailable,
            "max_surge": rollout.max_surge, "surge": rollout.surge, "surge_wanted": rollout.surge_wanted,
            "pending_reason": rollout.pending_reason, "replicas": replicas, "complete": complete}
def model_source(spec: dict | None) -> dict | None:
    """The model a deployment's spec serves, as resolved at submit (apps/storage put the version's
    run in the spec, so no query is needed): {model, version, mount, run, workload}, or None."""
    served = (spec or {}).get("model")
    if not isinstance(served, dict):
        return None
    return {"model": served.get("name"), "version": served.get("version"), "mount": served.get("mount"),
            "run": served.get("run"), "workload": served.get("workload")}
