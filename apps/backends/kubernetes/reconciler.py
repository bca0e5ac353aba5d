"""The level-triggered Kubernetes reconciler: desired state (Postgres) vs observed state (the
informer caches of Jobs, Pods, StatefulSets, Deployments, Nodes and Warning Events), status
written back through `workload_transition` (compare-and-set), conditions and events for humans.

Each look at a workload decides from the whole picture of it (its pods, its Job or set, its
events, its row), never from a single event: a reconciler killed and restarted simply lists
everything again and reaches the same decisions. What is looked at when (docs/kubernetes.md,
"At scale"):

- a full pass over every workload that is active (or inactive with pods still alive) and every
  node: at start, when this reconciler becomes the leader, after an informer listed again, and
  every RESYNC_SECONDS;
- between them, a pass over the work queue only: the workloads whose objects changed (a watch
  event on their pods, Job, set or events), whose row changed (a look at the rows every
  DB_SCAN_SECONDS: status, replicas, attempt, updated_at, stop times), that are not settled
  (admitted, stopping, leftovers, deployments), and that asked to be looked at again (a grace
  period, a restart's backoff, a deadline, a health check every HEALTH_CHECK_SECONDS); the
  nodes whose Node (or the pods of others on it) changed.

No API call is made inside a database transaction, launches aside: decisions are taken on the workload as read,
API calls made, and what is written back is compare-and-set (its status, attempt and
updated_at unchanged; otherwise it is looked at again with the next pass). Outcomes go through
`workload_observe` under a short row lock, the API call a restart needs (deleting the failed
attempt's Job) after it commits. Launches (a lost dispatch, a restart) go through the
dispatcher's own claim protocol (`workload_dispatch`, `workload_restart_launch`): the claim
commits first, then the objects are created under the row lock, one launcher at a time.

With several reconciler processes, only the one holding the cluster's Lease acts (leader.py).

- ADMITTED: dispatch (the dispatch task was lost, or is being retried).
- RUNNING training: a failed pod fails the attempt (gang); restarts while `max_restarts` allows
  (the old Job is deleted, attempt n+1 created), else FAILED (OOMKilled / exit code) or LOST;
  every replica Succeeded -> SUCCEEDED. A Job deleted behind Cairn's back counts as lost. A Job
  failed at its activeDeadlineSeconds (the run-time limit) -> STOPPING, then FAILED with reason
  DeadlineExceeded once its pods are gone, never restarted.
- RUNNING notebook / deployment: objects missing are created again; crash loops, image pull
  errors, OOM kills and unschedulable pods become conditions (they do not end the workload).
- STOPPING: the shared stop (services.workload_stop_step, as local and Slurm): stop once (delete
  Job / scale to zero), force after the grace period (again every grace period), STOPPED when
  no pod is left, or QUEUED (reason Requeued, attempt count kept) when it was preempted.
- A restart is decided at the failure (event Restarting) and launched once the failed attempt's
  pods are gone and the backoff has passed, through services.workload_restart_launch: a claim
  committed first, the Job created after it; a reconciler killed in between leaves the claim,
  which the next leader resumes (event LaunchResumed), adopting what was already created.
- Nodes: the cluster's Node rows follow the Kubernetes Nodes (added, changed, cordoned, removed).
- Node caches: what a pod's dataset fill reported of its node's cache (its init container's
  termination message, storage.cache_report) is recorded for that node, newest report per node.
"""
from __future__ import annotations

import copy
import logging
import re
import threading
import time
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.backends.base import LOST, TransientBackendError
from apps.backends.healing import SLOW_NODE, training_health_failure
from apps.backends.services import restart_backoff, workload_dispatch, workload_restart_launch, workload_stop_step
from apps.clusters.choices import Backend as BackendName
from apps.clusters.choices import NodeHealth
from apps.clusters.models import Cluster, Node, ResourcePool
from apps.core.heartbeat import heartbeat
from apps.core.outbox import outbox_enqueue
from apps.deployments.selectors import deployment_rollout_state
from apps.projects.models import Project
from apps.storage.services import node_cache_forget, node_cache_report
from apps.training.models import ReplicaProgress
from apps.workloads.choices import ACTIVE, TERMINAL, EventType, WorkloadStatus
from apps.workloads.deadlines import format_duration, run_deadline
from apps.workloads.kinds import kind_spec, registered_kinds
from apps.workloads.lifecycle import (
    DISRUPTED,
    PENDING_TIMEOUT,
    RESTART,
    AllSucceeded,
    AttemptFailed,
    first_failure,
    workload_locked,
    workload_observe,
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
from .leader import LeaderElector, default_identity
from .notebooks import notebook_check
from .queues import queue_admission
from .slim import SLIM
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
from .workqueue import WorkQueue

logger = logging.getLogger(__name__)
S = WorkloadStatus
WATCHED_CONDITIONS = ("PodScheduled", "ContainersReady")
NODE_SEEN_REFRESH_SECONDS = 30.0  # last_seen_at of an unchanged node is refreshed this often
CLEANUP_INTERVAL_SECONDS = 10.0  # finished workloads are looked for at most this often
FOREIGN_POD_FIELDS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
SERVICE_INFORMERS = {"StatefulSet": "statefulsets", "Deployment": "deployments"}  # object kind -> its informer
DB_SCAN_SECONDS = 1.0  # the workloads' rows are compared with the last look at most this often
# Between full passes the scan reads the rows updated since the last scan less this (a RUNNING
# row's write whose transaction commits later than this after its updated_at is seen with the next
# full pass, or the next change of its objects).
SCAN_SLACK_SECONDS = 10.0
LOAD_CHUNK = 200  # workloads read per query in a pass
SHARED_RELATED_ABOVE = 20  # a pass over more workloads reads their pools and projects apart, once
# What the DB scan compares of each workload's row with the last look.
SCAN_FIELDS = ("status", "replicas", "attempt", "updated_at", "term_sent_at", "kill_sent_at", "max_runtime_seconds")
# The Warning events Cairn reads (conditions of its workloads), one field-selected watch each:
# a field selector cannot say "in", and all Warning events of a busy cluster are many.
EVENT_REASONS = ("FailedScheduling", "FailedCreate")
# The workload an object of Cairn's is about: cairn-<id>, cairn-<id>-<attempt>-..., cairn-<id>-canary
WORKLOAD_NAME = re.compile(r"^cairn-(\d+)(?:-|$)")


def workload_of(obj: dict) -> int | None:
    """The workload id of one of Cairn's objects (its label, else its name), or None."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    value = labels.get(m.LABEL_WORKLOAD) or labels.get(m.LABEL_CANARY)
    if value and str(value).isdigit():
        return int(value)
    match = WORKLOAD_NAME.match(meta.get("name") or "")
    return int(match.group(1)) if match else None


def event_workload(event: dict) -> int | None:
    match = WORKLOAD_NAME.match((event.get("involvedObject") or {}).get("name") or "")
    return int(match.group(1)) if match else None


def _by_workload(obj: dict) -> list[str]:
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(m.LABEL_WORKLOAD)
    return [label] if label else []


def _by_node(pod: dict) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


def _by_involved_workload(event: dict) -> list[str]:
    workload = event_workload(event)
    return [str(workload)] if workload is not None else []


class ClusterReconciler:
    """Informers of one cluster and the pass that acts on what they show."""

    def __init__(self, cluster: Cluster, *, watch_timeout: int | None = None, resync_seconds: float | None = None,
                 relist_seconds: float | None = None):
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
        self.queue = WorkQueue(self.wakeup)
        self.resync_seconds = float(resync_seconds or opts["RESYNC_SECONDS"])
        self.health_seconds = float(opts["HEALTH_CHECK_SECONDS"])
        self.full_at = float("-inf")  # the last full pass (monotonic)
        self.lists_seen = -1  # the informers' list count at the last full pass: a new list means a full pass
        self.snapshot: dict[int, tuple] = {}  # workload id -> its row as last looked at (the DB scan)
        self.scanned_at = float("-inf")
        self.scanned_since = None  # when the last scan started (the database's clock: updated_at)
        self.health_due: dict[int, float] = {}  # workload id -> when its health is looked at next
        self.elector: LeaderElector | None = None  # set by KubernetesReconciler (leader election)
        self.leading = False  # whether it led at its last pass (taking the lead means a full pass)
        # What a health check could find, read per pass / per chunk (healing.training_health_failure
        # finds nothing without progress reports of the attempt or a bad node of the placement)
        self.bad_nodes: set[str] = set()
        self.bad_nodes_at: float | None = None  # the DB scan they were read with
        self.reporting: set[tuple[int, int]] = set()
        # what the passes did, for the tests and the benchmark
        self.stats = {"passes": 0, "full_passes": 0, "workloads": 0, "nodes_synced": 0, "rows_scanned": 0}
        common = {
            "wakeup": self.wakeup,
            "watch_timeout": watch_timeout or opts["WATCH_TIMEOUT"],
            "resync_seconds": float(relist_seconds or opts["RELIST_SECONDS"]),
            "page_size": int(opts["PAGE_SIZE"]),
            "on_change": self._on_change,
        }
        c, b, a = self.clients.core, self.clients.batch, self.clients.apps
        managed = {"label_selector": m.MANAGED_SELECTOR}
        self.informers: dict[str, Informer] = {
            "jobs": Informer(self.clients, "jobs", b.list_job_for_all_namespaces, slim=SLIM["jobs"], **managed,
                             **common),
            "pods": Informer(self.clients, "pods", c.list_pod_for_all_namespaces, slim=SLIM["pods"],
                             indexers={"workload": _by_workload, "node": _by_node}, **managed, **common),
            "statefulsets": Informer(self.clients, "statefulsets", a.list_stateful_set_for_all_namespaces,
                                     slim=SLIM["statefulsets"], **managed, **common),
            "deployments": Informer(self.clients, "deployments", a.list_deployment_for_all_namespaces,
                                    slim=SLIM["deployments"], **managed, **common),
            "nodes": Informer(self.clients, "nodes", c.list_node, slim=SLIM["nodes"], **common),
            # Pods Cairn does not own, bound to a node and not finished (DaemonSets, other
            # tenants): what they request is not Cairn's to place (sync_nodes), kept slim.
            "others": Informer(self.clients, "others", c.list_pod_for_all_namespaces,
                               label_selector=f"{m.LABEL_MANAGED_BY}!={m.MANAGED_BY}",
                               field_selector=FOREIGN_POD_FIELDS, keep=slim_foreign_pod,
                               indexers={"node": _by_node}, **common),
        }
        for reason in EVENT_REASONS:
            # (Cairn's objects are named cairn-<id>...: of another tenant's events only the name is read)
            self.informers[f"events-{reason}"] = Informer(
                self.clients, f"events-{reason}", c.list_event_for_all_namespaces,
                field_selector=f"type=Warning,reason={reason}", keep=lambda e: event_workload(e) is not None,
                slim=SLIM["events"], indexers={"workload": _by_involved_workload}, **common)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        for name, informer in self.informers.items():
            thread = threading.Thread(target=informer.run, args=(self.stop_event,), daemon=True,
                                      name=f"k8s-{self.cluster_name}-{name}")
            thread.start()
            self.threads.append(thread)

    def stop(self, timeout: float = 2.0, *, release: bool = True) -> None:
        """Stop the informers and, with an elector, leader election (`release`: the Lease is given
        up, so a standby takes over at once; without, as if the process died)."""
        self.stop_event.set()
        if self.elector is not None:
            self.elector.stop(release=release, timeout=timeout)
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self.informers.values())

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader

    # -- what changed (the informers' watch threads) ----------------------------------------------

    def _on_change(self, informer: Informer, key: tuple[str, str], old: dict | None, new: dict | None) -> None:
        """Queue what an object's change may concern: its workload, its node (and the workloads
        with pods there when its readiness changed)."""
        obj = new if new is not None else old
        name = informer.name
        if name == "nodes":
            self.queue.add_node(key[1])
            lost_before = node_lost_since(old) if old is not None else None
            lost_now = node_lost_since(new) if new is not None else None
            if (lost_before is None) != (lost_now is None):
                grace = float(kube_settings()["NODE_LOST_GRACE_SECONDS"])
                for pod in self.informers["pods"].by_index("node", key[1]):
                    workload = workload_of(pod)
                    if workload is not None:
                        self.queue.add_workload(workload)
                        if lost_now is not None:  # lost for good once the grace has passed
                            self.queue.add_after("workload", workload, grace + 1)
                if lost_now is not None:
                    self.queue.add_after("node", key[1], grace + 1)  # its health turns unhealthy then
        elif name == "others":  # capacity others hold on a node
            for pod in (old, new):
                node = ((pod or {}).get("spec") or {}).get("nodeName")
                if node:
                    self.queue.add_node(node)
        elif name.startswith("events-"):
            workload = event_workload(obj)
            if workload is not None:
                self.queue.add_workload(workload)
        else:
            workload = workload_of(obj)
            if workload is not None:
                self.queue.add_workload(workload)

    # -- the passes -------------------------------------------------------------------------------

    def step(self) -> int:
        """What the loop runs: nothing unless leading; a full pass when one is due (first pass,
        the lead just taken, an informer listed again, RESYNC_SECONDS since the last), else the
        work queue. Returns how many workloads it acted on."""
        if not self.synced:
            return 0
        leading = self.is_leader()
        took_lead, self.leading = leading and not self.leading, leading
        if not leading:
            return 0
        lists = sum(informer.lists for informer in self.informers.values())
        if took_lead or lists != self.lists_seen or time.monotonic() - self.full_at >= self.resync_seconds:
            return self.reconcile_pass()
        return self.reconcile_changed()

    def reconcile_pass(self) -> int:
        """One full level-triggered pass over the cluster: every node, every workload that is
        active or has pods alive. Returns how many workloads it acted on."""
        if not self.synced:
            return 0
        lists = sum(informer.lists for informer in self.informers.values())
        self.queue.take()  # everything is looked at now
        cluster = Cluster.objects.get(pk=self.cluster_id)
        self.sync_nodes(cluster)
        self.record_cache_reports(self.informers["pods"].items(), prune=True)
        self._scan(full=True)
        ids = sorted(self.snapshot)
        self.health_due = {k: v for k, v in self.health_due.items() if k in self.snapshot}
        acted = self._reconcile_ids(ids)
        acted += self._clean_when_due()
        self.full_at, self.lists_seen = time.monotonic(), lists
        self.stats["passes"] += 1
        self.stats["full_passes"] += 1
        return acted

    def reconcile_changed(self) -> int:
        """A pass over the work queue only (see the module's docstring). Returns how many
        workloads it acted on."""
        if not self.synced:
            return 0
        batch = self.queue.take()
        if batch.nodes:
            self.sync_nodes(Cluster.objects.get(pk=self.cluster_id), only=batch.nodes)
        ids = set(batch.workloads)
        if time.monotonic() - self.scanned_at >= DB_SCAN_SECONDS:
            ids |= self._scan()
        if ids:
            pods = [pod for workload in ids for pod in self.informers["pods"].by_index("workload", str(workload))]
            self.record_cache_reports(pods)
        acted = self._reconcile_ids(sorted(ids))
        acted += self._clean_when_due()
        self.stats["passes"] += 1
        return acted

    def _clean_when_due(self) -> int:
        if time.monotonic() - self.cleaned_at < CLEANUP_INTERVAL_SECONDS:  # a query over finished work
            return 0
        self.cleaned_at = time.monotonic()
        return self.clean_finished()

    def _scan(self, *, full: bool = False) -> set[int]:
        """Read the rows of the cluster's active workloads (and inactive ones with pods alive),
        one query, and return those to look at: changed since the last scan, or not settled
        (anything but RUNNING, and RUNNING deployments, whose rollouts live in rows of their own).

        A full scan (with a full pass) reads every such row. Between full passes only the rows
        that may have changed are read: those not settled and those whose `updated_at` (set by
        every write of a scanned field) is within SCAN_SLACK_SECONDS of the last scan, so that a
        scan costs what changed, not what runs (10,000 running jobs: kube_scale)."""
        started = timezone.now()
        rows = (Workload.objects.filter(pool__cluster_id=self.cluster_id)
                .filter(Q(status__in=ACTIVE) | Q(runtime__alive=True)))
        if not full and self.scanned_since is not None:
            services = [k for k in registered_kinds() if kind_spec(k).kubernetes_object == "Deployment"]
            rows = rows.filter(Q(updated_at__gte=self.scanned_since - timedelta(seconds=SCAN_SLACK_SECONDS))
                               | ~Q(status=S.RUNNING) | Q(kind__in=services))
        snapshot, dirty = {}, set()
        for pk, kind, *row in rows.values_list("pk", "kind", *SCAN_FIELDS):
            snapshot[pk] = row = tuple(row)
            if (row[0] != S.RUNNING or kind_spec(kind).kubernetes_object == "Deployment"
                    or self.snapshot.get(pk) != row):
                dirty.add(pk)
        self.stats["rows_scanned"] += len(snapshot)
        if full:
            self.snapshot = snapshot
        else:  # (a row that left the active set stays until the next full scan: its look finds it gone)
            self.snapshot.update(snapshot)
        self.scanned_since, self.scanned_at = started, time.monotonic()
        return dirty

    def _reconcile_ids(self, ids: list[int]) -> int:
        """Look at these workloads (those still active or with pods alive), read LOAD_CHUNK per
        query. Stops early when the lead is lost meanwhile."""
        acted = 0
        pods = self.informers["pods"]
        leading = self.is_leader()  # (a pass called directly, not by step(), may run without the lead)
        if ids and (self.bad_nodes_at is None or self.bad_nodes_at != self.scanned_at):
            # (read again with each DB scan, not with every look at a changed workload)
            self.bad_nodes_at = self.scanned_at
            self.bad_nodes = set(Node.objects.filter(cluster_id=self.cluster_id).filter(
                Q(health=NodeHealth.UNHEALTHY) | Q(schedulable=False, cordon_reason=SLOW_NODE))
                .values_list("name", flat=True))
        # Many workloads (a full pass): the cluster's pools (with the cluster) and the projects are
        # read once and shared, not a JSON-heavy pool and cluster decoded again with each row; a
        # few (changed ones): joined to their rows, one query.
        shared = len(ids) > SHARED_RELATED_ABOVE
        if shared:
            pools = {pool.pk: pool for pool in ResourcePool.objects.select_related("cluster").filter(
                cluster_id=self.cluster_id)}
            projects: dict[int, Project] = {}
        for start in range(0, len(ids), LOAD_CHUNK):
            if leading and not self.is_leader():
                logger.warning("kubernetes reconciler: cluster %s: the lead was lost mid-pass; stopping it",
                               self.cluster_name)
                break
            rows = Workload.objects if shared else Workload.objects.select_related("pool__cluster", "project")
            # (whether its attempt's ranks report progress, in the same query: health checks)
            chunk = list(rows.filter(pk__in=ids[start:start + LOAD_CHUNK], pool__cluster_id=self.cluster_id)
                         .filter(Q(status__in=ACTIVE) | Q(runtime__alive=True))
                         .annotate(reports_progress=Exists(ReplicaProgress.objects.filter(
                             workload_id=OuterRef("pk"), attempt=OuterRef("attempt")))).order_by("pk"))
            if shared:
                missing = {w.project_id for w in chunk} - set(projects)
                if missing:
                    projects.update((p.pk, p) for p in Project.objects.filter(pk__in=missing))
                for workload in chunk:  # (a pool made since it was read is read on use)
                    if workload.pool_id in pools:
                        workload.pool = pools[workload.pool_id]
                    workload.project = projects[workload.project_id]
            self.reporting = {(w.pk, w.attempt) for w in chunk if w.reports_progress}
            for workload in chunk:
                self.stats["workloads"] += 1
                try:
                    if workload.status == S.ADMITTED:
                        workload_dispatch(workload_id=workload.pk)
                        acted += 1
                        continue
                    its_pods = pods.by_index("workload", str(workload.pk))
                    if self._reconcile(workload, its_pods):
                        acted += 1
                    self._look_again(workload, its_pods)
                except TransientBackendError as exc:
                    logger.warning("kubernetes reconciler: workload %s: %s (next pass)", workload.pk, exc)
                    self.queue.add_after("workload", workload.pk, 1.0)
                except Exception:
                    logger.exception("kubernetes reconciler: workload %s", workload.pk)
                    self.queue.add_after("workload", workload.pk, 5.0)
        return acted

    def _look_again(self, workload: Workload, pods: list[dict]) -> None:
        """Queue the workload again when time alone will change what it needs (the DB scan looks
        at everything not RUNNING every DB_SCAN_SECONDS)."""
        if workload.status != S.RUNNING:
            return
        unplaced = [t for t in (unplaced_since(p) for p in pods) if t is not None]
        if unplaced:  # the pending timeout (_pending_too_long)
            timeout = workload.pool.pending_timeout_seconds
            timeout = float(timeout if timeout is not None else kube_settings().get("PENDING_TIMEOUT_SECONDS", 600.0))
            if timeout > 0:
                self.queue.add_after("workload", workload.pk, max(1.0, min(unplaced) + timeout - time.time() + 0.5))
        runtime = workload.runtime or {}
        if runtime.get("after"):  # a restart waiting for the old pods and its backoff
            self.queue.add_after("workload", workload.pk, 1.0)
        if kind_spec(workload.kind).runs_to_completion:
            # the health check, only where it could find something (else the next full pass): a
            # recheck of every running job every HEALTH_CHECK_SECONDS floods the queue (kube_scale)
            placed = {e.get("node") for e in workload.placement or [] if isinstance(e, dict)}
            if (workload.pk, workload.attempt) in self.reporting or placed & self.bad_nodes:
                self.queue.add_after("workload", workload.pk, self.health_seconds)
            limit = run_deadline(workload)
            if limit is not None:
                due = limit.timestamp() + float(kube_settings()["DEADLINE_BACKSTOP_SECONDS"]) - time.time()
                self.queue.add_after("workload", workload.pk, max(1.0, due))
        refused = next((c for c in workload.conditions or [] if c.get("type") == "PodsCreated"
                        and c.get("status") == "False"), None)
        if refused is not None:
            since = epoch_seconds(refused.get("lastTransitionTime")) or time.time()
            timeout = float(kube_settings()["POD_CREATE_TIMEOUT_SECONDS"])
            self.queue.add_after("workload", workload.pk, max(1.0, since + timeout - time.time() + 0.5))

    def _health_due(self, workload: Workload) -> bool:
        """Whether a running training job's health (hangs, stragglers, bad nodes: a few queries)
        is due: every HEALTH_CHECK_SECONDS, not at every look, and only when it could find
        something (its ranks report progress, or a node of its placement is bad)."""
        placed = {e.get("node") for e in workload.placement or [] if isinstance(e, dict)}
        if (workload.pk, workload.attempt) not in self.reporting and not placed & self.bad_nodes:
            return False
        now = time.monotonic()
        if now < self.health_due.get(workload.pk, float("-inf")):
            return False
        self.health_due[workload.pk] = now + self.health_seconds
        return True

    # -- writes: compare-and-set, never around an API call ------------------------------------------

    def _cas(self, workload: Workload, **fields) -> bool:
        """Write `fields` if the row still is as read (status, attempt, updated_at); else queue it
        to be looked at again with what changed."""
        now = timezone.now()
        won = Workload.objects.filter(pk=workload.pk, status=workload.status, attempt=workload.attempt,
                                      updated_at=workload.updated_at).update(updated_at=now, **fields)
        if not won:
            self.queue.add_workload(workload.pk)
            return False
        for key, value in fields.items():
            setattr(workload, key, value)
        workload.updated_at = now
        self._seen(workload)
        return True

    def _seen(self, workload: Workload) -> None:
        """Its row as this reconciler wrote it: its own write is no change for the next DB scan."""
        if workload.pk in self.snapshot:
            self.snapshot[workload.pk] = tuple(getattr(workload, f) for f in SCAN_FIELDS)

    def _save(self, workload: Workload, runtime: dict, **fields) -> bool:
        """The backend's bookkeeping (`runtime`, plus e.g. `term_sent_at`), compare-and-set."""
        return self._cas(workload, runtime=runtime, **fields)

    def _observe(self, workload: Workload, observation, *, relaunch=None):
        """`workload_observe` under a short row lock (no API call in it), if the workload is
        still as read; returns its Decision, or None (busy, or changed: looked at again)."""
        with transaction.atomic():
            locked = workload_locked(workload.pk, skip_locked=True)
            if locked is None or (locked.status, locked.attempt) != (workload.status, workload.attempt):
                self.queue.add_workload(workload.pk)
                return None
            return workload_observe(workload=locked, observation=observation, relaunch=relaunch)

    def _merge_runtime(self, workload: Workload, runtime: dict, keys: tuple[str, ...]) -> None:
        """Write `keys` of `runtime` into the row's runtime as it is now (a key absent from
        `runtime` is removed), under a short row lock: for bookkeeping others write beside
        (the deployment's rollout, its placement), which a compare-and-set would keep losing."""
        with transaction.atomic():
            locked = workload_locked(workload.pk)
            if locked is None or locked.status != workload.status:
                return
            merged = {k: v for k, v in (locked.runtime or {}).items() if k not in keys}
            merged.update({k: runtime[k] for k in keys if k in runtime})
            if merged != (locked.runtime or {}):
                now = timezone.now()
                Workload.objects.filter(pk=workload.pk).update(runtime=merged, updated_at=now)
                locked.runtime, locked.updated_at = merged, now
                self._seen(locked)
                workload.runtime, workload.updated_at = merged, now

    def _events_of(self, workload_id: int) -> list[dict]:
        return [event for reason in EVENT_REASONS
                for event in self.informers[f"events-{reason}"].by_index("workload", str(workload_id))]

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
        """The shared stop (apps.backends.services.workload_stop_step), written compare-and-set.
        Until the first stop signal its objects count as alive: a Job or set may still be
        creating pods the cache has not seen."""
        alive = (workload.term_sent_at is None or any(is_alive(p) for p in pods)
                 or self._service_object(workload, wanted_replicas=True) is not None)
        return workload_stop_step(
            workload, self.backend, alive=alive,
            save=lambda runtime, **fields: self._save(workload, runtime, **fields),
            observe=lambda observation: self._observe(workload, observation))

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
        queue = queue_admission(self, workload, job, [p for p in pods if pod_view(p).attempt == attempt])
        if queue.requeued:  # Kueue / Volcano (queues.py)
            return True
        viewed = [(p, pod_view(p)) for p in pods]  # (each pod's view once: a full pass looks at every pod)
        views = [v for _, v in viewed if v.attempt in (attempt, None)]
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
            return self._observe(workload, AllSucceeded(replicas=workload.replicas)) is not None
        if job is None and not views and self._confirmed_missing("Job", namespace, job_name):
            return self._attempt_failed(workload, None, f"Job {namespace}/{job_name} disappeared (deleted outside "
                                                        "Cairn?) before its replicas finished.", lost=True)
        live = sorted((v.state for v in views if v.state.alive), key=lambda state: state.replica)
        if len(live) == workload.replicas and self._health_due(workload):
            # All running: hung, straggling, or on a bad node? (self-healing, apps/backends/healing.py,
            # every HEALTH_CHECK_SECONDS)
            failure = training_health_failure(workload, self.backend, live)
            if failure is not None:
                return self._attempt_failed(workload, None, failure["message"],
                                            restart_reason=failure.get("restart_reason", ""),
                                            move=bool(failure.get("move")))
        current = [p for p, v in viewed if v.attempt == attempt]
        release_gated(self.clients, current)  # per-replica placement (manifests.PLACEMENT_GATE)
        if not queue.held and self._pending_too_long(workload, current):  # the cluster's queue decides
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
        return self._requeue_free(
            workload, PENDING_TIMEOUT, f"A replica waited {waited} for a node that would take it (see PodScheduled); "
            "requeued, its quota released, without spending a restart.")

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
        return self._requeue_free(
            workload, DISRUPTED, f"{why} Requeued without spending a restart: attempt {workload.attempt + 1} starts "
            f"once every pod of attempt {workload.attempt} is gone.")

    def _requeue_free(self, workload: Workload, reason: str, message: str, *, runtime: dict | None = None) -> bool:
        """Back to the queue without spending a restart (a disruption, Kueue's eviction, a pending
        timeout): the attempt's pods are signalled, its placement and quota released, a cycle asked for."""
        self.backend.signal(workload)
        done = workload_transition(
            workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.QUEUED, reason=reason, message=message,
            event_type=EventType.WARNING, runtime={**(runtime if runtime is not None else workload.runtime or {}),
                                                   "alive": True},
            placement=[], term_sent_at=timezone.now())
        if done is not None:
            outbox_enqueue(topic="scheduling.cycle", payload={})
        return done is not None

    def _launch_when_gone(self, workload: Workload, runtime: dict, pods: list[dict]) -> bool:
        """Start the restart's attempt once no pod of the failed one is left (a pod on a lost node
        never finishes terminating: force-deleted) and its backoff has passed since then."""
        if runtime.get("launching"):  # claimed and not launched (its reconciler died): resume it
            return workload_restart_launch(workload_id=workload.pk)
        after = runtime["after"]
        old = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(m.LABEL_ATTEMPT)
               == str(after["attempt"])]
        if old:
            self._delete_failed_job(workload, after)
            self._force_delete_on_lost_nodes(workload, old)
            return False
        now = time.time()
        if after.get("gone_at") is None:
            return self._save(workload, {**runtime, "after": {**after, "gone_at": now}})
        backoff = restart_backoff(int(after["attempt"]))
        if now - float(after["gone_at"]) < backoff:
            return False
        # Claimed, then launched, as a dispatch is (its Restarting event was recorded with the decision)
        return workload_restart_launch(workload_id=workload.pk)

    def _delete_failed_job(self, workload: Workload, after: dict) -> None:
        """The failed attempt's Job is deleted right after the restart is decided (_attempt_failed);
        should that call have failed, it is deleted here, while its pods are still seen."""
        name = m.job_name(workload.pk, int(after["attempt"]))
        job = self.informers["jobs"].get(namespace_of(workload), name)
        if job is None or (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        if time.time() - float(after.get("failed_at") or 0) < 10:  # just deleted: the cache lags
            return
        failed = copy.copy(workload)
        failed.runtime = {**(workload.runtime or {}), "job": name}
        self.backend.signal(failed)

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
            # The next attempt is created by a later pass, once every pod of this one is gone and
            # the backoff passed (_launch_when_gone): never two attempts' ranks at once, as
            # docs/training.md promises. The failed attempt's Job is deleted once this commits.
            return {"backend": self.backend.name, "attempt": attempt, "namespace": namespace_of(workload),
                    "job": m.job_name(workload.pk, attempt), "alive": True, "replicas": [], "objects": [],
                    "after": {"attempt": attempt - 1, "failed_at": time.time()}}

        if move:  # off a bad node: delete the attempt's Job now; the next dispatch waits until its pods are gone
            self.backend.signal(workload)
        decision = self._observe(workload, relaunch=relaunch, observation=AttemptFailed(
            message=message, exit_code=view.state.exit_code if view is not None else None,
            lost=lost or (view is not None and view.state.phase == LOST),
            reason="OOMKilled" if view is not None and view.reason == "OOMKilled" else "",
            restart_reason=restart_reason, move=move))
        if decision is not None and decision.kind == RESTART:
            self.backend.signal(workload)  # the failed attempt's Job (`workload` as read: its runtime names it)
        return decision is not None

    # -- notebooks and deployments --------------------------------------------------------------

    def _reconcile_service(self, workload: Workload, pods: list[dict]) -> bool:
        kind = kind_spec(workload.kind).kubernetes_object
        if self._service_object(workload) is None and self._confirmed_missing(
                kind, namespace_of(workload), m.object_name(workload.pk)):
            runtime = self.backend.launch(workload, attempt=workload.attempt)  # ensure: creates what is missing
            if self._save(workload, {**(workload.runtime or {}), **runtime}):
                workload_event_record(workload=workload, reason="Recreated", type=EventType.WARNING,
                                      message=f"The {kind} was missing (deleted outside Cairn?); created it again.")
            return True
        if kind == "StatefulSet":  # a notebook: its home volume's zone, its node lost (notebooks.py)
            handled = notebook_check(self, workload, pods)
            if handled is not None:
                return handled
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
        for event in self._events_of(workload.pk):
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
            self._merge_runtime(workload, runtime, ("main_rollout", "revision", "canary"))
        return bool(events)

    # -- conditions -----------------------------------------------------------------------------

    def _scheduler_message(self, workload: Workload, pod_names: set[str]) -> str:
        """The latest FailedScheduling event of the workload's pods (more precise than the pod condition)."""
        latest = None
        for event in self._events_of(workload.pk):
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
        warnings = []
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
                warnings.append(cond)
        if not changed or not self._cas(workload, conditions=list(current.values())):
            return False
        for cond in warnings:  # once the conditions are written (a lost compare-and-set says nothing)
            workload_event_record(workload=workload, reason=cond["reason"], message=cond["message"],
                                  type=EventType.WARNING)
        return True

    # -- nodes ----------------------------------------------------------------------------------

    def record_cache_reports(self, pods: list[dict], *, prune: bool = False) -> int:
        """Record the node cache reports of pods not seen yet, oldest first. Returns how many.
        `prune` (with every pod: a full pass) forgets the reports of pods that are gone."""
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
        if prune and len(self.cache_reports_seen) > 10_000:  # pods come and go; keep the memory bounded
            live = {(p.get("metadata") or {}).get("uid") for p in pods}
            self.cache_reports_seen = {k: v for k, v in self.cache_reports_seen.items() if k in live}
        return recorded

    def sync_nodes(self, cluster: Cluster, only: set[str] | None = None) -> dict[str, int]:
        """Make the cluster's Node rows match the Kubernetes Nodes: every one (a full pass), or
        `only` these (whose Node, or others' pods on it, changed)."""
        options = options_for(cluster)
        pools = list(ResourcePool.objects.filter(cluster=cluster))
        topology_keys = [k for pool in pools for k in pool.topology_keys or []]
        rows = Node.objects.filter(cluster=cluster)
        nodes = self.informers["nodes"]
        if only is None:
            objs = nodes.items()
        else:
            rows = rows.filter(name__in=only)
            objs = [obj for obj in (nodes.get("", name) for name in sorted(only)) if obj is not None]
        existing = {node.name: node for node in rows}
        seen: set[str] = set()
        counts = {"created": 0, "updated": 0, "removed": 0}
        seen_only: list[int] = []
        new: list[Node] = []
        now = timezone.now()
        devices = tuple(v.resource for v in options.accelerators.values())
        others = self.informers["others"]
        self.stats["nodes_synced"] += len(objs)
        for obj in objs:
            name = (obj.get("metadata") or {}).get("name")
            if not name:
                continue
            seen.add(name)
            fields = node_inventory(obj, gpu_resource=options.gpu_resource,
                                    gpu_product_label=options.gpu_product_label, topology_keys=topology_keys,
                                    vendors=options.accelerators, now=time.time(),
                                    lost_after=float(kube_settings()["NODE_LOST_GRACE_SECONDS"]))
            fields["others_gpu_milli"], fields["others_cpu_milli"], fields["others_memory_mb"] = \
                usage_by_node(others.by_index("node", name), devices).get(name, (0, 0, 0))
            pool = _pool_for(pools, fields["labels"])
            node = existing.get(name)
            if node is None:
                new.append(Node(cluster=cluster, name=name, pool=pool, last_seen_at=now, **fields))
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
                continue  # nothing new: no write
            else:
                seen_only.append(node.pk)  # only seen again: one UPDATE for all of them below
                continue
            node.last_seen_at = now
            node.save(update_fields=[*changed, "last_seen_at"])
        if seen_only:
            Node.objects.filter(pk__in=seen_only).update(last_seen_at=now)
        if new:  # (a node another pass created meanwhile is left to it)
            counts["created"] = len(Node.objects.bulk_create(new, batch_size=500, ignore_conflicts=True))
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
    """Every Kubernetes cluster with credentials: a ClusterReconciler each, started on demand,
    with a LeaderElector each (LEADER_ELECTION): its informers run either way (a standby's caches
    are warm), its passes only while it holds the cluster's Lease."""

    def __init__(self, *, identity: str | None = None, leader_election: bool | None = None, **cluster_options):
        self.clusters: dict[int, ClusterReconciler] = {}
        self.cluster_options = cluster_options
        self.wakeup = threading.Event()
        self.identity = identity or default_identity()
        self.leader_election = (kube_settings()["LEADER_ELECTION"] if leader_election is None
                                else leader_election)

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
                reconciler.wakeup = reconciler.queue.wakeup = self.wakeup
                for informer in reconciler.informers.values():
                    informer.wakeup = self.wakeup
                if self.leader_election:
                    reconciler.elector = LeaderElector(reconciler.clients, identity=self.identity,
                                                       wakeup=self.wakeup, cluster_name=cluster.name)
                    reconciler.elector.start()
                reconciler.start()
                self.clusters[pk] = reconciler

    def pass_once(self) -> int:
        self.refresh()
        return sum(reconciler.step() for reconciler in self.clusters.values())

    def next_due(self) -> float | None:
        """Seconds until a workload or node asked to be looked at again is due, if any."""
        due = [d for d in (r.queue.next_due() for r in self.clusters.values()) if d is not None]
        return min(due) if due else None

    def stop(self, *, release: bool = True) -> None:
        for reconciler in self.clusters.values():
            reconciler.stop(release=release)
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
            due = reconciler.next_due()
            reconciler.wakeup.wait(interval if due is None else min(interval, due))
            reconciler.wakeup.clear()
    finally:
        reconciler.stop()
        connection.close()
        logger.info("kubernetes reconciler: stopped")
