"""Reads of the deployments app: keys, the gateway's view of a deployment, its public URL."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.db.models import QuerySet

from apps.clusters.backends import backend_spec
from apps.projects.choices import may_call_deployment
from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.runtime import Runtime

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
    runtime = Runtime.of(workload)
    if workload.status != WorkloadStatus.RUNNING or runtime.alive is False:
        return []
    attempt = runtime.attempt
    targets = []
    for record in runtime.replicas:
        if not record.get("ready"):
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
    if not targets and backend_spec(runtime.backend).rollout_progress and runtime.url:
        # One Service in front of the main Deployment's pods (Kubernetes spreads the connections),
        # and one in front of the canary's, with the revisions they run, for the canary weight.
        main = runtime.main_rollout or {}
        canary = runtime.canary or {}
        if canary.get("ready") and canary.get("url"):
            targets.append(Target(key=f"{workload.pk}/{attempt}/canary", revision=canary.get("revision"),
                                  url=str(canary["url"]).rstrip("/")))
        if not targets or main.get("ready", 1):
            targets.append(Target(key=f"{workload.pk}/{attempt}/service", revision=main.get("revision"),
                                  url=runtime.url.rstrip("/")))
    return targets


@dataclass(frozen=True)
class RolloutState:
    """A deployment's rollout, as a backend that lays it out itself (Kubernetes) needs it."""

    stable: int = 1
    canary: int | None = None
    canary_spec: dict | None = None  # the workload's spec with the canary revision's
    surge: int = 0  # admitted surge replicas (counted in Workload.replicas)
    surge_wanted: int = 0
    max_unavailable: int = 1


def deployment_rollout_state(workload: Workload) -> RolloutState:
    rollout = DeploymentRollout.objects.filter(workload=workload).first()
    if rollout is None:
        return RolloutState()
    canary_spec = None
    if rollout.canary_revision is not None:
        revision = DeploymentRevision.objects.filter(workload=workload, number=rollout.canary_revision).first()
        canary_spec = {**(workload.spec or {}), **(revision.spec if revision else {})}
    return RolloutState(stable=rollout.stable_revision, canary=rollout.canary_revision, canary_spec=canary_spec,
                        surge=rollout.surge, surge_wanted=rollout.surge_wanted,
                        max_unavailable=rollout.max_unavailable)


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
    # Unavailable replicas are counted against all of them, surge included. The reconciler replaces
    # `max_unavailable` old replicas in place; a rolling update's admitted surge replicas do not
    # add to that: once ready, each takes over an old replica's place (deployment_rollouts_advance),
    # so the update starts no replica it then stops (0 with max_unavailable 0: only takeovers).
    surge = rollout.surge if rollout.canary_revision is not None else 0
    return rollout.max_unavailable + surge, rollout.stable_revision, plan


def deployment_revisions(*, workload: Workload) -> QuerySet[DeploymentRevision]:
    return DeploymentRevision.objects.filter(workload=workload).select_related("created_by")


def deployment_rollout_status(*, workload: Workload) -> dict:
    """Which revision each replica runs and whether the rollout is complete (for the API and CLI)."""
    workload.refresh_from_db(fields=["runtime", "replicas"])
    rollout = DeploymentRollout.objects.filter(workload=workload).first() or DeploymentRollout(workload=workload)
    runtime = Runtime.of(workload)
    if backend_spec(runtime.backend).rollout_progress and runtime.main_rollout is not None:
        replicas, complete = _kubernetes_rollout(rollout, runtime)
        return {"stable_revision": rollout.stable_revision, "canary_revision": rollout.canary_revision,
                "canary_weight": rollout.canary_weight, "max_unavailable": rollout.max_unavailable,
                "max_surge": rollout.max_surge, "surge": rollout.surge, "surge_wanted": rollout.surge_wanted,
                "pending_reason": rollout.pending_reason, "replicas": replicas, "complete": complete}
    records = {r.get("replica"): r for r in runtime.replicas}
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


def _kubernetes_rollout(rollout: DeploymentRollout, runtime: Runtime) -> tuple[list[dict], bool]:
    """On Kubernetes pods have no fixed number: the main Deployment's pods are listed as its
    updated ones (the template's revision) then the others (revision unknown: an older one), then
    the canary's pod. Complete: the controller has rolled the stable revision out, no canary pod
    is left over, and no surge is wanted or held."""
    main, canary = runtime.main_rollout or {}, runtime.canary
    replicas = [{"replica": i, "revision": main.get("revision") if i < main.get("updated", 0) else None,
                 "ready": i < main.get("ready", 0), "surge": False} for i in range(main.get("replicas", 0))]
    if canary:
        replicas.append({"replica": len(replicas), "revision": canary.get("revision"),
                         "ready": bool(canary.get("ready")), "surge": bool(rollout.surge)})
    complete = (bool(main.get("complete")) and main.get("revision") == rollout.stable_revision
                and rollout.surge_wanted <= rollout.surge
                and (bool(canary and canary.get("ready")) if rollout.canary_revision is not None else not canary)
                and not (rollout.surge and rollout.canary_revision is None))
    return replicas, complete


def deployment_endpoint(workload: Workload, *, user, role: str | None) -> str | None:
    """A running deployment's URL, for whoever the gateway lets call it with their own
    credentials (may_call_deployment: members and above; every reader of a public one)."""
    public = isinstance(workload.spec, dict) and workload.spec.get("public") is True
    url = Runtime.of(workload).url
    return url if may_call_deployment(role, public=public) and url else None
