"""The level-triggered Kubernetes reconciler: desired state (Postgres) vs observed state (the
informer caches of Jobs, Pods, StatefulSets, Deployments, Nodes and Warning Events), status
written back through `workload_transition` (compare-and-set), conditions and events for humans.

Each pass looks at every workload of the cluster that is active (or inactive with pods still
alive) and decides from the whole picture, never from a single event: a reconciler killed and
restarted simply lists everything again and reaches the same decisions.

- ADMITTED: dispatch (the dispatch task was lost, or is being retried).
- RUNNING training: a failed pod fails the attempt (gang); restarts while `max_restarts` allows
  (the old Job is deleted, attempt n+1 created), else FAILED (OOMKilled / exit code) or LOST;
  every replica Succeeded -> SUCCEEDED. A Job deleted behind Cairn's back counts as lost. A Job
  failed at its activeDeadlineSeconds (the run-time limit) -> STOPPING, then FAILED with reason
  DeadlineExceeded once its pods are gone, never restarted.
- RUNNING notebook / deployment: objects missing are created again; crash loops, image pull
  errors, OOM kills and unschedulable pods become conditions (they do not end the workload).
- STOPPING: stop once (delete Job / scale to zero), force after the grace period, STOPPED when
  no pod is left, or QUEUED (reason Requeued, attempt count kept) when it was preempted.
- Nodes: the cluster's Node rows follow the Kubernetes Nodes (added, changed, cordoned, removed).
- Node caches: what a pod's dataset fill reported of its node's cache (its init container's
  termination message, storage.cache_report) is recorded for that node, newest report per node.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.backends.base import LOST, LaunchError, TransientBackendError
from apps.backends.healing import training_health_failure
from apps.backends.services import restart_backoff, workload_dispatch
from apps.clusters.choices import Backend as BackendName
from apps.clusters.choices import NodeHealth
from apps.clusters.models import Cluster, Node, ResourcePool
from apps.core.heartbeat import heartbeat
from apps.core.outbox import outbox_enqueue
from apps.deployments.selectors import deployment_rollout_state
from apps.storage.services import node_cache_forget, node_cache_report
from apps.workloads.choices import ACTIVE, TERMINAL, EventType, WorkloadStatus
from apps.workloads.deadlines import format_duration, run_deadline
from apps.workloads.kinds import kind_spec
from apps.workloads.lifecycle import (
    DISRUPTED,
    PENDING_TIMEOUT,
    AllGone,
    AllSucceeded,
    AttemptFailed,
    first_failure,
    workload_locked,
    workload_observe,
    workload_runtime_save,
)
from apps.workloads.models import Workload
from apps.workloads.services import (
    workload_event_record,
    workload_stop_at_deadline,
    workload_transition,
)

from . import manifests as m
from .backend import KubernetesBackend, is_alive, namespace_of, options_for, release_gated
from .client import ApiError, ConnectionNotConfigured, clients_for, kube_settings
from .informer import Informer
from .status import (
    PodView,
    Problem,
    describe_failure,
    disruption,
    epoch_seconds,
    event_time,
    job_deadline_exceeded,
    job_failure,
    node_inventory,
    node_lost_since,
    pod_view,
    slim_foreign_pod,
    unplaced_since,
    usage_by_node,
)
from .storage import cache_report

logger = logging.getLogger(__name__)
S = WorkloadStatus
WATCHED_CONDITIONS = ("PodScheduled", "ContainersReady")
NODE_SEEN_REFRESH_SECONDS = 30.0  # last_seen_at of an unchanged node is refreshed this often
CLEANUP_INTERVAL_SECONDS = 10.0  # finished workloads are looked for at most this often
FOREIGN_POD_FIELDS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
SERVICE_INFORMERS = {"StatefulSet": "statefulsets", "Deployment": "deployments"}  # object kind -> its informer


def _grace_seconds() -> float:
    return float(settings.CAIRN["STOP_GRACE_SECONDS"])


class ClusterReconciler:
    """Informers of one cluster and the pass that acts on what they show."""

    def __init__(self, cluster: Cluster, *, watch_timeout: int | None = None, resync_seconds: float | None = None):
        self.cluster_id = cluster.pk
        self.cluster_name = cluster.name
        self.credential_version = None  # set by KubernetesReconciler: restart when credentials change
        self.clients = clients_for(cluster)
        self.backend = KubernetesBackend()
        self.wakeup = threading.Event()
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        # Cache reports already recorded (pod uid -> its fill's finish time) and the newest one
        # per node: an older report seen later (a list after a restart) must not undo a newer one.
        self.cleaned_at = float("-inf")  # the last clean_finished()
        self.cache_reports_seen: dict[str, str] = {}
        self.cache_report_at: dict[str, str] = {}
        opts = kube_settings()
        common = {
            "wakeup": self.wakeup,
            "watch_timeout": watch_timeout or opts["WATCH_TIMEOUT"],
            "resync_seconds": resync_seconds or opts["RESYNC_SECONDS"],
        }
        c, b, a = self.clients.core, self.clients.batch, self.clients.apps
        managed = {"label_selector": m.MANAGED_SELECTOR}
        self.informers: dict[str, Informer] = {
            "jobs": Informer(self.clients, "jobs", b.list_job_for_all_namespaces, **managed, **common),
            "pods": Informer(self.clients, "pods", c.list_pod_for_all_namespaces, **managed, **common),
            "statefulsets": Informer(self.clients, "statefulsets", a.list_stateful_set_for_all_namespaces,
                                     **managed, **common),
            "deployments": Informer(self.clients, "deployments", a.list_deployment_for_all_namespaces,
                                    **managed, **common),
            "nodes": Informer(self.clients, "nodes", c.list_node, **common),
            # Pods Cairn does not own, bound to a node and not finished (DaemonSets, other
            # tenants): what they request is not Cairn's to place (sync_nodes), kept slim.
            "others": Informer(self.clients, "others", c.list_pod_for_all_namespaces,
                               label_selector=f"{m.LABEL_MANAGED_BY}!={m.MANAGED_BY}",
                               field_selector=FOREIGN_POD_FIELDS, keep=slim_foreign_pod, **common),
            "events": Informer(self.clients, "events", c.list_event_for_all_namespaces, field_selector="type=Warning",
                               keep=lambda e: ((e.get("involvedObject") or {}).get("name") or "").startswith("cairn-"),
                               **common),
        }

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        for name, informer in self.informers.items():
            thread = threading.Thread(target=informer.run, args=(self.stop_event,), daemon=True,
                                      name=f"k8s-{self.cluster_name}-{name}")
            thread.start()
            self.threads.append(thread)

    def stop(self, timeout: float = 2.0) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self.informers.values())

    # -- the pass -------------------------------------------------------------------------------

    def reconcile_pass(self) -> int:
        """One level-triggered pass over the cluster. Returns how many workloads it acted on."""
        if not self.synced:
            return 0
        cluster = Cluster.objects.get(pk=self.cluster_id)
        self.sync_nodes(cluster)
        pods_by_workload: dict[str, list[dict]] = {}
        pods = self.informers["pods"].items()
        self.record_cache_reports(pods)
        for pod in pods:
            workload_label = ((pod.get("metadata") or {}).get("labels") or {}).get(m.LABEL_WORKLOAD)
            if workload_label:
                pods_by_workload.setdefault(workload_label, []).append(pod)
        ids = list(
            Workload.objects.filter(pool__cluster_id=self.cluster_id)
            .filter(Q(status__in=ACTIVE) | Q(runtime__alive=True)).order_by("pk").values_list("pk", "status")
        )
        acted = 0
        for workload_id, status in ids:
            try:
                if status == S.ADMITTED:
                    workload_dispatch(workload_id=workload_id)
                    acted += 1
                    continue
                with transaction.atomic():
                    workload = workload_locked(workload_id, skip_locked=True)
                    if workload is not None and self._reconcile(workload, pods_by_workload.get(str(workload_id), [])):
                        acted += 1
            except TransientBackendError as exc:
                logger.warning("kubernetes reconciler: workload %s: %s (next pass)", workload_id, exc)
            except Exception:
                logger.exception("kubernetes reconciler: workload %s", workload_id)
        if time.monotonic() - self.cleaned_at >= CLEANUP_INTERVAL_SECONDS:  # a query over finished work
            self.cleaned_at = time.monotonic()
            acted += self.clean_finished()
        return acted

    def clean_finished(self) -> int:
        """Finished workloads leave nothing behind: their Secrets (run tokens, dataset credentials)
        are deleted as soon as no pod of theirs runs, everything else RETENTION_SECONDS after they
        ended (the Job's pods keep their logs until then). Marked in the runtime, once each."""
        retention = float(kube_settings()["RETENTION_SECONDS"])
        due = timezone.now() - timedelta(seconds=retention)
        # (positive lookups only: a JSON key that is missing compares as NULL, which exclude() drops)
        gone = Q(runtime__alive=False) | ~Q(runtime__has_key="alive")
        due_now = ~Q(runtime__has_key="cleaned") | Q(runtime__cleaned="secrets", finished_at__lte=due)
        finished = (Workload.objects.filter(pool__cluster_id=self.cluster_id, status__in=TERMINAL)
                    .filter(gone).filter(due_now)
                    .select_related("pool__cluster", "project").order_by("pk")[:50])
        acted = 0
        for workload in finished:
            runtime = dict(workload.runtime or {})
            stage = "all" if workload.finished_at is None or workload.finished_at <= due else "secrets"
            if runtime.get("cleaned") == stage:
                continue
            try:
                self.backend.cleanup(workload, secrets_only=stage == "secrets")
            except Exception as exc:  # noqa: BLE001 - the next pass tries again
                logger.warning("kubernetes reconciler: cleaning up workload %s: %s", workload.pk, exc)
                continue
            # the status in the filter: a notebook started again meanwhile keeps its new runtime
            Workload.objects.filter(pk=workload.pk, status=workload.status).update(
                runtime={**runtime, "cleaned": stage})
            acted += 1
        return acted

    def _reconcile(self, workload: Workload, pods: list[dict]) -> bool:
        if workload.status == S.STOPPING or workload.status not in ACTIVE:
            return self._reconcile_stopping(workload, pods)
        if workload.status != S.RUNNING:
            return False
        if kind_spec(workload.kind).runs_to_completion:
            return self._reconcile_training(workload, pods)
        return self._reconcile_service(workload, pods)

    # -- stopping and leftovers -----------------------------------------------------------------

    def _reconcile_stopping(self, workload: Workload, pods: list[dict]) -> bool:
        runtime = workload.runtime or {}
        now = timezone.now()
        if workload.term_sent_at is None:  # the stop task was lost, or this is a leftover
            self.backend.signal(workload)
            workload_runtime_save(workload, runtime, term_sent_at=now)
            return True
        alive = [p for p in pods if is_alive(p)]
        if not alive and not self._service_object(workload, wanted_replicas=True):
            if workload.status == S.STOPPING:
                workload_observe(workload=workload, observation=AllGone(
                    killed=workload.kill_sent_at is not None, grace_seconds=_grace_seconds()))
                return True
            if runtime.get("alive"):
                workload_runtime_save(workload, {**runtime, "alive": False})
                return True
            return False
        if (alive and (now - workload.term_sent_at).total_seconds() >= _grace_seconds()
                and workload.kill_sent_at is None):
            self.backend.signal(workload, force=True)
            workload_runtime_save(workload, runtime, kill_sent_at=now)
            return True
        return False

    def _service_object(self, workload: Workload, *, wanted_replicas: bool = False) -> dict | None:
        """The StatefulSet / Deployment of a notebook / deployment (from the cache); with
        `wanted_replicas`, only when it still asks for pods (not yet scaled to zero)."""
        informer = self.informers.get(SERVICE_INFORMERS.get(kind_spec(workload.kind).kubernetes_object, ""))
        if informer is None:  # a Job: nothing kept up
            return None
        obj = informer.get(namespace_of(workload), m.object_name(workload.pk))
        if obj is not None and wanted_replicas and not (obj.get("spec") or {}).get("replicas"):
            return None
        return obj

    # -- training -------------------------------------------------------------------------------

    def _reconcile_training(self, workload: Workload, pods: list[dict]) -> bool:
        runtime = workload.runtime or {}
        attempt = int(runtime.get("attempt") or workload.attempt)
        namespace = namespace_of(workload)
        if runtime.get("after"):  # a restart decided: launched once the last attempt is gone
            return self._launch_when_gone(workload, runtime, pods)
        job_name = runtime.get("job") or m.job_name(workload.pk, attempt)
        job = self.informers["jobs"].get(namespace, job_name)
        views = [pod_view(p) for p in pods if pod_view(p).attempt in (attempt, None)]
        failed = [v for v in views if v.state.failed]
        deadline = job_deadline_exceeded(job)
        if deadline is None and failed and workload.max_runtime_seconds:
            # Pods the Job controller terminated at the deadline can reach the cache before the
            # Job's condition does: ask the API server before taking them for a failure.
            deadline = job_deadline_exceeded(self._read(self.clients.batch.read_namespaced_job, namespace, job_name))
        if deadline is not None:
            # Before the pods: those the Job controller terminated at the deadline look failed
            # (exit code 143) but are not a failure to restart from.
            return workload_stop_at_deadline(
                workload_id=workload.pk, signalled=True, detail=f"Kubernetes: {deadline}.") is not None
        if self._outlived_limit(workload, job, views) and self._outlived_limit(
                workload, self._read(self.clients.batch.read_namespaced_job, namespace, job_name) or job, views):
            # Confirmed on the API server first: the cached Job can lag behind a new startTime
            # (with Kueue, set when it is unsuspended), and a stop cannot be taken back.
            backstop = format_duration(kube_settings()["DEADLINE_BACKSTOP_SECONDS"])
            return workload_stop_at_deadline(
                workload_id=workload.pk,
                detail=f"Kubernetes had not stopped it {backstop} after the limit (the Job's activeDeadlineSeconds); "
                       "Cairn stops it.") is not None
        disrupted = self._disruption(pods, attempt)
        if disrupted is not None:  # before the failures: a disrupted pod may look failed too
            return self._requeue_disrupted(workload, disrupted)
        if failed:
            first = first_failure(failed, lambda view: view.state)
            return self._attempt_failed(workload, first, describe_failure(first, memory_mb=workload.memory_mb))
        job_conditions = {c.get("type"): c for c in ((job or {}).get("status") or {}).get("conditions") or []
                          if c.get("status") == "True"}
        failure = job_failure(job)
        if failure is not None:  # Failed, or FailureTarget with any reason (pods maybe never terminating)
            return self._attempt_failed(workload, None, f"The Job failed ({failure[0]}): {failure[1]}")
        succeeded = {v.replica for v in views if v.state.phase != LOST and not v.state.alive and v.state.exit_code == 0}
        if len(succeeded) >= workload.replicas or "Complete" in job_conditions:
            workload_observe(workload=workload, observation=AllSucceeded(replicas=workload.replicas))
            return True
        if job is None and not views and self._confirmed_missing("Job", namespace, job_name):
            return self._attempt_failed(workload, None, f"Job {namespace}/{job_name} disappeared (deleted outside "
                                                        "Cairn?) before its replicas finished.", lost=True)
        live = sorted((v.state for v in views if v.state.alive), key=lambda state: state.replica)
        if len(live) == workload.replicas:
            # All running: hung, straggling, or on a bad node? (self-healing, apps/backends/healing.py)
            failure = training_health_failure(workload, self.backend, live)
            if failure is not None:
                return self._attempt_failed(workload, None, failure["message"],
                                            restart_reason=failure.get("restart_reason", ""),
                                            move=bool(failure.get("move")))
        current = [p for p in pods if pod_view(p).attempt == attempt]
        release_gated(self.clients, current)  # per-replica placement (manifests.PLACEMENT_GATE)
        if self._pending_too_long(workload, current):
            return True
        refused = self._refused(workload, views, owners={("Job", job_name)})
        if refused is not None and self._fail_if_refused_too_long(workload, refused):
            return True
        return self._update_conditions(workload, views, refused=refused)

    def _pending_too_long(self, workload: Workload, pods: list[dict]) -> bool:
        """A replica no node has taken for the pool's pending timeout (or PENDING_TIMEOUT_SECONDS)
        — Cairn's books and the nodes disagree, or its gate was never released —: the workload
        goes back to the queue with reason PendingTimeout, its quota released, no restart spent."""
        since = [t for t in (unplaced_since(p) for p in pods) if t is not None]
        timeout = workload.pool.pending_timeout_seconds
        timeout = float(timeout if timeout is not None else kube_settings().get("PENDING_TIMEOUT_SECONDS", 600.0))
        if not since or timeout <= 0 or time.time() - min(since) < timeout:
            return False
        waited = format_duration(timeout)
        self.backend.signal(workload)
        done = workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.QUEUED, reason=PENDING_TIMEOUT,
            message=f"A replica waited {waited} for a node that would take it (see PodScheduled); requeued, its "
                    f"quota released, without spending a restart.", event_type=EventType.WARNING,
            runtime={**(workload.runtime or {}), "alive": True}, placement=[], term_sent_at=timezone.now())
        if done is not None:
            outbox_enqueue(topic="scheduling.cycle", payload={})
        return done is not None

    def _outlived_limit(self, workload: Workload, job: dict | None, views: list[PodView]) -> bool:
        """A backstop for the Job controller, which enforces the limit (activeDeadlineSeconds):
        replicas still alive DEADLINE_BACKSTOP_SECONDS after it (the Job's deadline edited or
        removed, a Job controller that is behind). The Job's own clock counts too: with Kueue it
        starts when the Job is unsuspended, later than Cairn's `started_at`."""
        limit = run_deadline(workload)
        if limit is None or not any(v.state.alive for v in views):
            return False
        job_started = epoch_seconds(((job or {}).get("status") or {}).get("startTime"))
        due = limit.timestamp()
        if job_started is not None:
            due = max(due, job_started + workload.max_runtime_seconds)
        return time.time() >= due + float(kube_settings()["DEADLINE_BACKSTOP_SECONDS"])

    def _read(self, read, namespace: str, name: str) -> dict | None:
        try:
            found = self.clients.call(read, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return found if isinstance(found, dict) else None

    def _confirmed_missing(self, kind: str, namespace: str, name: str) -> bool:
        """The cache may lag behind a create: ask the API server before concluding."""
        read = {"Job": self.clients.batch.read_namespaced_job,
                "StatefulSet": self.clients.apps.read_namespaced_stateful_set,
                "Deployment": self.clients.apps.read_namespaced_deployment}[kind]
        try:
            self.clients.call(read, name, namespace)
        except ApiError as exc:
            return exc.status == 404
        return False

    # -- disruptions and restarts (B2) -----------------------------------------------------------

    def _disruption(self, pods: list[dict], attempt: int) -> str | None:
        """Why the attempt was disrupted, if it was: a pod of it with a DisruptionTarget condition
        (drained, preempted by kube-scheduler, evicted from a lost node), or alive on a node that
        has not been Ready for NODE_LOST_GRACE_SECONDS."""
        grace = float(kube_settings()["NODE_LOST_GRACE_SECONDS"])
        for pod in pods:
            meta = pod.get("metadata") or {}
            if (meta.get("labels") or {}).get(m.LABEL_ATTEMPT) != str(attempt):
                continue
            why = disruption(pod)
            if why:
                return f"Pod {meta.get('name')} was disrupted ({why})."
            node_name = (pod.get("spec") or {}).get("nodeName")
            node = self.informers["nodes"].get("", node_name) if node_name and is_alive(pod) else None
            lost = node_lost_since(node) if node is not None else None
            if lost is not None and time.time() - lost >= grace:
                return f"Node {node_name} of pod {meta.get('name')} has not been Ready for {format_duration(grace)}."
        return None

    def _requeue_disrupted(self, workload: Workload, why: str) -> bool:
        """A disruption is no failure of the job: the attempt's Job is deleted (the rest of the
        gang with it) and the workload goes back to the queue, its restarts untouched (the
        Disrupted requeue counts as a free attempt, lifecycle.Facts). Its next attempt starts once
        every pod of this one is gone (the leftover path below, and the launch's own check)."""
        self.backend.signal(workload)
        done = workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.QUEUED, reason=DISRUPTED,
            message=f"{why} Requeued without spending a restart: attempt {workload.attempt + 1} starts once every "
                    f"pod of attempt {workload.attempt} is gone.", event_type=EventType.WARNING,
            runtime={**(workload.runtime or {}), "alive": True}, placement=[], term_sent_at=timezone.now())
        if done is not None:
            outbox_enqueue(topic="scheduling.cycle", payload={})
        return done is not None

    def _launch_when_gone(self, workload: Workload, runtime: dict, pods: list[dict]) -> bool:
        """Start the restart's attempt once no pod of the failed one is left (a pod on a lost node
        never finishes terminating: force-deleted) and its backoff has passed since then."""
        after = runtime["after"]
        old = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(m.LABEL_ATTEMPT)
               == str(after["attempt"])]
        if old:
            self._force_delete_on_lost_nodes(workload, old)
            return False
        now = time.time()
        if after.get("gone_at") is None:
            workload_runtime_save(workload, {**runtime, "after": {**after, "gone_at": now}})
            return True
        backoff = restart_backoff(int(after["attempt"]))
        if now - float(after["gone_at"]) < backoff:
            return False
        try:
            started = self.backend.launch(workload, attempt=int(runtime["attempt"]))
        except LaunchError as exc:
            return workload_transition(
                workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.FAILED, reason="LaunchFailed",
                message=f"Could not start attempt {runtime['attempt']} of the restart: {exc}",
                event_type=EventType.WARNING, runtime={**runtime, "alive": False}) is not None
        workload_runtime_save(workload, started)  # (its Restarting event was recorded with the decision)
        return True

    def _force_delete_on_lost_nodes(self, workload: Workload, pods: list[dict]) -> None:
        """Terminating pods on a node that is not Ready never end by themselves (no kubelet to
        confirm): delete them with no grace period. Pods on healthy nodes are left to terminate."""
        for pod in pods:
            meta, node_name = pod.get("metadata") or {}, (pod.get("spec") or {}).get("nodeName")
            node = self.informers["nodes"].get("", node_name) if node_name else None
            if meta.get("deletionTimestamp") and node is not None and node_lost_since(node) is not None:
                try:
                    self.clients.call(self.clients.core.delete_namespaced_pod, meta["name"], meta["namespace"],
                                      grace_period_seconds=0)
                except ApiError as exc:
                    if exc.status != 404:
                        raise

    def _attempt_failed(self, workload: Workload, view: PodView | None, message: str, *, lost: bool = False,
                        restart_reason: str = "", move: bool = False) -> bool:
        def relaunch(attempt: int) -> dict:
            # Delete the failed attempt's Job; the next one is created by a later pass, once every
            # pod of this one is gone and the backoff passed (_launch_when_gone): never two
            # attempts' ranks at once, as docs/training.md promises.
            self.backend.signal(workload)
            return {"backend": self.backend.name, "attempt": attempt, "namespace": namespace_of(workload),
                    "job": m.job_name(workload.pk, attempt), "alive": True, "replicas": [], "objects": [],
                    "after": {"attempt": attempt - 1, "failed_at": time.time()}}

        if move:  # off a bad node: delete the attempt's Job now; the next dispatch waits until its pods are gone
            self.backend.signal(workload)
        workload_observe(workload=workload, relaunch=relaunch, observation=AttemptFailed(
            message=message, exit_code=view.state.exit_code if view is not None else None,
            lost=lost or (view is not None and view.state.phase == LOST),
            reason="OOMKilled" if view is not None and view.reason == "OOMKilled" else "",
            restart_reason=restart_reason, move=move))
        return True

    # -- notebooks and deployments --------------------------------------------------------------

    def _reconcile_service(self, workload: Workload, pods: list[dict]) -> bool:
        kind = kind_spec(workload.kind).kubernetes_object
        if self._service_object(workload) is None and self._confirmed_missing(
                kind, namespace_of(workload), m.object_name(workload.pk)):
            runtime = self.backend.launch(workload, attempt=workload.attempt)  # ensure: creates what is missing
            workload_runtime_save(workload, {**(workload.runtime or {}), **runtime})
            workload_event_record(workload=workload, reason="Recreated", type=EventType.WARNING,
                                  message=f"The {kind} was missing (deleted outside Cairn?); created it again.")
            return True
        scaled = False
        obj = self._service_object(workload)
        if kind == "Deployment" and obj is not None:
            scaled = self._sync_deployment(workload, obj)
        views = [pod_view(p) for p in pods if (p.get("metadata") or {}).get("deletionTimestamp") is None]
        name = m.object_name(workload.pk)
        # a Deployment's pods come from its ReplicaSets (cairn-<id>-<hash>, the canary's too)
        refused = self._refused(workload, views, owners={(kind, name)},
                                prefix=("ReplicaSet", f"{name}-") if kind == "Deployment" else None, obj=obj)
        if refused is not None and self._fail_if_refused_too_long(workload, refused):
            return True
        return self._update_conditions(workload, views, refused=refused) or scaled

    # -- pods the controllers may not create (B1) -------------------------------------------------

    def _refused(self, workload: Workload, views: list[PodView], *, owners: set[tuple[str, str]],
                 prefix: tuple[str, str] | None = None, obj: dict | None = None) -> Problem | None:
        """Why the workload's controller cannot create its pods, while it has fewer than it should:
        its latest FailedCreate Warning event (Pod Security refusing the pod, a quota, a missing
        service account; the controller retries with backoff and the workload would show RUNNING
        with its quota held forever), or a ReplicaFailure condition of the Deployment. Events older
        than the workload's start or its newest pod are done with."""
        if sum(1 for v in views if v.state.alive) >= max(workload.replicas, 1):
            return None
        for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
            if condition.get("type") == "ReplicaFailure" and condition.get("status") == "True":
                return Problem("PodsCreated", condition.get("reason") or "FailedCreate",
                               f"Kubernetes does not create its pods: {condition.get('message') or ''}".strip())
        namespace = namespace_of(workload)
        since = workload.started_at.timestamp() - 5 if workload.started_at else 0.0
        latest, latest_at = None, since
        for event in self.informers["events"].items():
            involved = event.get("involvedObject") or {}
            if event.get("reason") != "FailedCreate" or involved.get("namespace") != namespace:
                continue
            key = (involved.get("kind"), involved.get("name") or "")
            if key not in owners and not (prefix and key[0] == prefix[0] and key[1].startswith(prefix[1])):
                continue
            at = event_time(event)
            if at >= latest_at:
                latest, latest_at = event, at
        if latest is None:
            return None
        involved = latest["involvedObject"]
        return Problem("PodsCreated", "FailedCreate",
                       f"The {involved.get('kind')} controller cannot create its pods: {latest.get('message') or ''}")

    def _fail_if_refused_too_long(self, workload: Workload, refused: Problem) -> bool:
        """FAILED (quota released) once the pods have been refused for POD_CREATE_TIMEOUT_SECONDS
        since Cairn first saw it; the objects are then stopped like any finished workload's."""
        current = next((c for c in workload.conditions or [] if c.get("type") == "PodsCreated"), None)
        if current is None or current.get("status") != "False":
            return False
        since = epoch_seconds(current.get("lastTransitionTime"))
        timeout = float(kube_settings()["POD_CREATE_TIMEOUT_SECONDS"])
        if since is None or time.time() - since < timeout:
            return False
        done = workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.FAILED, reason="FailedCreate",
            message=f"{refused.message} (refused for {format_duration(timeout)}; its quota is released).",
            event_type=EventType.WARNING)
        return done is not None

    def _sync_deployment(self, workload: Workload, obj: dict) -> bool:
        """The Deployments follow the admitted replicas and the rollout (backend.sync_deployment);
        the runtime records what the gateway and the rollout need: the main Deployment's revision
        and progress, and the canary's Service and readiness."""
        namespace = namespace_of(workload)
        canary = self.informers["deployments"].get(namespace, m.canary_name(workload.pk))
        events = self.backend.sync_deployment(workload, obj, canary)
        runtime = dict(workload.runtime or {})
        progress = m.deployment_progress(obj)
        runtime["main_rollout"] = progress
        for reason, message in events:
            if reason == "RolloutStarted":
                runtime["revision"] = deployment_rollout_state(workload).stable
            workload_event_record(workload=workload, reason=reason, message=message)
        if any(reason == "CanaryRemoved" for reason, _ in events):
            runtime.pop("canary", None)
        elif canary is not None or any(reason == "CanaryStarted" for reason, _ in events):
            seen = m.deployment_progress(canary) if canary is not None else {"revision": None, "ready": 0}
            runtime["canary"] = {"url": f"http://{m.canary_name(workload.pk)}.{namespace}.svc/",
                                 "revision": seen["revision"], "ready": seen["ready"]}
        if runtime != (workload.runtime or {}):
            workload_runtime_save(workload, runtime)
        return bool(events)

    # -- conditions -----------------------------------------------------------------------------

    def _scheduler_message(self, workload: Workload, pod_names: set[str]) -> str:
        """The latest FailedScheduling event of the workload's pods (more precise than the pod condition)."""
        latest = None
        for event in self.informers["events"].items():
            involved = event.get("involvedObject") or {}
            if involved.get("name") in pod_names and event.get("reason") == "FailedScheduling":
                if latest is None or event_time(event) >= event_time(latest):
                    latest = event
        return (latest or {}).get("message", "")

    def _update_conditions(self, workload: Workload, views: list[PodView], *, refused: Problem | None = None) -> bool:
        problems: dict[str, Problem] = {}
        for view in sorted(views, key=lambda v: v.replica):
            if view.problem and view.problem.condition not in problems:
                problems[view.problem.condition] = view.problem
        if "PodScheduled" in problems:
            detail = self._scheduler_message(workload, {v.name for v in views})
            if detail:
                problem = problems["PodScheduled"]
                replica = problem.message.split(" cannot", 1)[0]
                problems["PodScheduled"] = Problem(problem.condition, problem.reason,
                                                   f"{replica} cannot be scheduled: {detail}")
        wanted: dict[str, dict] = {}
        if refused is not None:
            wanted["PodsCreated"] = {"type": "PodsCreated", "status": "False", "reason": refused.reason,
                                     "message": refused.message}
        elif any(c.get("type") == "PodsCreated" for c in workload.conditions or []):
            wanted["PodsCreated"] = {"type": "PodsCreated", "status": "True", "reason": "Created",
                                     "message": "The controller creates the pods."}
        if views:
            for ctype in WATCHED_CONDITIONS:
                if ctype in problems:
                    p = problems[ctype]
                    wanted[ctype] = {"type": ctype, "status": "False", "reason": p.reason, "message": p.message}
            if "PodScheduled" not in wanted:
                wanted["PodScheduled"] = {"type": "PodScheduled", "status": "True", "reason": "Scheduled",
                                          "message": "Every replica is placed on a node."}
            if "ContainersReady" not in wanted:
                ready = sum(1 for v in views if v.ready)
                wanted["ContainersReady"] = (
                    {"type": "ContainersReady", "status": "True", "reason": "AllReady",
                     "message": f"{ready} replica(s) running and ready."} if ready and ready == len(views) else
                    {"type": "ContainersReady", "status": "False", "reason": "Starting",
                     "message": f"{ready} of {len(views)} replica(s) ready."})
        current = {c["type"]: c for c in workload.conditions or []}
        changed = False
        now = timezone.now().isoformat()
        for ctype, cond in wanted.items():
            old = current.get(ctype)
            if old and all(old.get(k) == cond[k] for k in ("status", "reason", "message")):
                continue
            transition = now if not old or old.get("status") != cond["status"] else old.get("lastTransitionTime", now)
            current[ctype] = {**cond, "lastTransitionTime": transition}
            changed = True
            if cond["status"] == "False" and cond["reason"] != "Starting" and (not old or old.get("reason") != cond[
                    "reason"]):
                workload_event_record(workload=workload, reason=cond["reason"], message=cond["message"],
                                      type=EventType.WARNING)
        if changed:
            conditions = list(current.values())
            Workload.objects.filter(pk=workload.pk).update(conditions=conditions, updated_at=timezone.now())
            workload.conditions = conditions
        return changed

    # -- nodes ----------------------------------------------------------------------------------

    def record_cache_reports(self, pods: list[dict]) -> int:
        """Record the node cache reports of pods not seen yet, oldest first. Returns how many."""
        fresh = []
        for pod in pods:
            found = cache_report(pod)
            uid = (pod.get("metadata") or {}).get("uid") or (pod.get("metadata") or {}).get("name", "")
            if found is not None and self.cache_reports_seen.get(uid) != found[2]:
                fresh.append((found[2], uid, found[0], found[1]))
        recorded = 0
        for finished, uid, node, report in sorted(fresh):
            self.cache_reports_seen[uid] = finished
            if finished < self.cache_report_at.get(node, ""):
                continue  # a newer report of this node is already recorded
            try:
                if node_cache_report(cluster_id=self.cluster_id, node=node, report=report):
                    self.cache_report_at[node] = finished
                    recorded += 1
            except Exception:  # a hint for placement: never worth a failed pass
                logger.exception("kubernetes reconciler: the cache report of pod %s", uid)
        if len(self.cache_reports_seen) > 10_000:  # pods come and go; keep the memory bounded
            live = {(p.get("metadata") or {}).get("uid") for p in pods}
            self.cache_reports_seen = {k: v for k, v in self.cache_reports_seen.items() if k in live}
        return recorded

    def sync_nodes(self, cluster: Cluster) -> dict[str, int]:
        """Make the cluster's Node rows match the Kubernetes Nodes (only after a full list)."""
        options = options_for(cluster)
        pools = list(ResourcePool.objects.filter(cluster=cluster))
        topology_keys = [k for pool in pools for k in pool.topology_keys or []]
        existing = {node.name: node for node in Node.objects.filter(cluster=cluster)}
        seen: set[str] = set()
        counts = {"created": 0, "updated": 0, "removed": 0}
        now = timezone.now()
        others = usage_by_node(self.informers["others"].items(),
                               tuple(v.resource for v in options.accelerators.values()))
        for obj in self.informers["nodes"].items():
            name = (obj.get("metadata") or {}).get("name")
            if not name:
                continue
            seen.add(name)
            fields = node_inventory(obj, gpu_resource=options.gpu_resource,
                                    gpu_product_label=options.gpu_product_label, topology_keys=topology_keys,
                                    vendors=options.accelerators, now=time.time(),
                                    lost_after=float(kube_settings()["NODE_LOST_GRACE_SECONDS"]))
            fields["others_gpu_milli"], fields["others_cpu_milli"], fields["others_memory_mb"] = \
                others.get(name, (0, 0, 0))
            pool = _pool_for(pools, fields["labels"])
            node = existing.get(name)
            if node is None:
                Node.objects.create(cluster=cluster, name=name, pool=pool, last_seen_at=now, **fields)
                counts["created"] += 1
                continue
            if node.cordon_reason:  # Cairn's own cordon (a GPU fault, an admin) outlives the Node's state
                fields["schedulable"] = False
                if node.health == NodeHealth.UNHEALTHY:
                    fields["health"] = node.health
            changed = [f for f, v in fields.items() if getattr(node, f) != v]
            if pool is not None and node.pool_id is None:
                node.pool = pool
                changed.append("pool")
            for f in changed:
                if f != "pool":
                    setattr(node, f, fields[f])
            if changed:
                counts["updated"] += 1
            elif node.last_seen_at and (now - node.last_seen_at).total_seconds() < NODE_SEEN_REFRESH_SECONDS:
                continue  # nothing new: no write (a pass runs every second over every node)
            node.last_seen_at = now
            node.save(update_fields=[*changed, "last_seen_at"])
        gone = [n.pk for name, n in existing.items() if name not in seen]
        if gone:
            counts["removed"] = Node.objects.filter(pk__in=gone).delete()[0]
            node_cache_forget(cluster_id=cluster.pk, nodes=[name for name in existing if name not in seen])
        return counts


def _pool_for(pools: list[ResourcePool], labels: dict) -> ResourcePool | None:
    """The pool whose node selector the node's labels satisfy; the cluster's only pool otherwise."""
    for pool in pools:
        selector = pool.node_selector or {}
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            return pool
    unselective = [pool for pool in pools if not pool.node_selector]
    return unselective[0] if len(unselective) == 1 else None


# -- the process ---------------------------------------------------------------------------------

class KubernetesReconciler:
    """Every Kubernetes cluster with credentials: a ClusterReconciler each, started on demand."""

    def __init__(self, **cluster_options):
        self.clusters: dict[int, ClusterReconciler] = {}
        self.cluster_options = cluster_options
        self.wakeup = threading.Event()

    def refresh(self) -> None:
        """Start reconcilers for new clusters, stop those of removed ones, restart on new credentials."""
        wanted = {c.pk: c for c in Cluster.objects.filter(backend=BackendName.KUBERNETES, credential__isnull=False)
                  .select_related("credential")}
        for pk in list(self.clusters):
            cluster = wanted.get(pk)
            if cluster is None or self.clusters[pk].credential_version != cluster.credential.updated_at:
                self.clusters.pop(pk).stop()
        for pk, cluster in wanted.items():
            if pk not in self.clusters:
                try:
                    reconciler = ClusterReconciler(cluster, **self.cluster_options)
                except ConnectionNotConfigured as exc:
                    logger.warning("kubernetes reconciler: cluster %s: %s", cluster.name, exc)
                    continue
                reconciler.credential_version = cluster.credential.updated_at
                reconciler.wakeup = self.wakeup
                for informer in reconciler.informers.values():
                    informer.wakeup = self.wakeup
                reconciler.start()
                self.clusters[pk] = reconciler

    def pass_once(self) -> int:
        self.refresh()
        return sum(reconciler.reconcile_pass() for reconciler in self.clusters.values())

    def stop(self) -> None:
        for reconciler in self.clusters.values():
            reconciler.stop()
        self.clusters.clear()


def run_kubernetes_reconciler(stop: threading.Event, interval: float, **cluster_options) -> None:
    """Reconcile every Kubernetes cluster until `stop`; watch events wake a pass early."""
    from django.db import close_old_connections

    reconciler = KubernetesReconciler(**cluster_options)
    logger.info("kubernetes reconciler: started (interval %gs)", interval)
    try:
        while not stop.is_set():
            close_old_connections()
            try:
                acted = reconciler.pass_once()
                if acted:
                    logger.info("kubernetes reconciler: acted on %s workload(s)", acted)
            except Exception:
                logger.exception("kubernetes reconciler: pass failed; retrying in %gs", interval)
            heartbeat("reconciler-kubernetes")
            reconciler.wakeup.wait(interval)
            reconciler.wakeup.clear()
    finally:
        reconciler.stop()
        connection.close()
        logger.info("kubernetes reconciler: stopped")
