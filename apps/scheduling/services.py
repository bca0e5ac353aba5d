"""Applies the policy: snapshot from PostgreSQL, pure decisions, compare-and-set writes.

Only one scheduler runs a cycle at a time: PostgreSQL elects it with a transaction-level
advisory lock (SQLite, used in embedded mode, serialises writers by itself).
"""
import logging
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from apps.clusters.models import Node
from apps.core.outbox import outbox_enqueue
from apps.quotas.models import Quota
from apps.workloads.choices import ACTIVE, WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.services import workload_transition

from .policy import Admit, NodeState, PendingWorkload, QuotaState, Resources, Snapshot, Wait, schedule

logger = logging.getLogger(__name__)
SCHEDULER_LOCK_KEY = 0x43A1_0001  # arbitrary, constant: "the Cairn scheduler"


@dataclass
class CycleResult:
    ran: bool
    admitted: int = 0
    waiting: int = 0


def _try_leader_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [SCHEDULER_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def scheduling_snapshot() -> Snapshot:
    """Plain-data view of nodes, quotas and pending workloads, with current usage subtracted."""
    nodes = {
        n.pk: NodeState(
            name=n.name, pool=n.pool.name, gpu_model=n.gpu_model,
            schedulable=n.schedulable and n.health in ("healthy", "degraded"),
            free=Resources(n.gpu_count * 1000, n.cpu_milli_allocatable, n.memory_mb_allocatable),
        )
        for n in Node.objects.filter(pool__isnull=False).select_related("pool")
    }
    by_name = {(state.pool, state.name): state for state in nodes.values()}
    quotas = {
        (q.project.slug, q.pool.name): QuotaState(
            project=q.project.slug, pool=q.pool.name,
            nominal=Resources(q.nominal_gpu_milli, q.nominal_cpu_milli, q.nominal_memory_mb),
        )
        for q in Quota.objects.select_related("project", "pool")
    }
    active = Workload.objects.filter(status__in=ACTIVE).select_related("project", "pool")
    for workload in active.only("project__slug", "pool__name", "placement", "gpu_milli", "cpu_milli", "memory_mb",
                                "replicas"):
        per_replica = Resources(workload.gpu_milli, workload.cpu_milli, workload.memory_mb)
        quota = quotas.get((workload.project.slug, workload.pool.name))
        if quota is not None:
            quota.used = quota.used + per_replica.times(workload.replicas)
        for entry in workload.placement or []:
            node = by_name.get((workload.pool.name, entry.get("node")))
            if node is not None:
                node.free = node.free - per_replica
    pending = [
        PendingWorkload(
            id=w.pk, project=w.project.slug, pool=w.pool.name, priority=w.priority, submitted_at=w.created_at,
            replicas=w.replicas, per_replica=Resources(w.gpu_milli, w.cpu_milli, w.memory_mb), gpu_model=w.gpu_model,
        )
        for w in Workload.objects.filter(status=WorkloadStatus.QUEUED).select_related("project", "pool")
    ]
    return Snapshot(nodes=list(nodes.values()), quotas=list(quotas.values()), pending=pending)


def scheduling_cycle() -> CycleResult:
    """Run one cycle: admit what fits, record why the rest waits. Safe to call concurrently."""
    with transaction.atomic():
        if not _try_leader_lock():
            return CycleResult(ran=False)
        snapshot = scheduling_snapshot()
        decisions = schedule(snapshot)
        result = CycleResult(ran=True)
        now = timezone.now()
        for decision in decisions:
            if isinstance(decision, Admit):
                admitted = workload_transition(
                    workload_id=decision.workload_id, from_statuses={WorkloadStatus.QUEUED},
                    to_status=WorkloadStatus.ADMITTED, reason="Admitted",
                    message="Placed on " + ", ".join(sorted({p["node"] for p in decision.placement})) + ".",
                    placement=decision.placement, admitted_at=now,
                )
                if admitted is not None:
                    outbox_enqueue(topic="workload.dispatch", payload={"workload_id": decision.workload_id})
                    result.admitted += 1
            elif isinstance(decision, Wait):
                result.waiting += 1
                # Only write when the reason changed, so a steady queue costs no writes.
                Workload.objects.filter(pk=decision.workload_id, status=WorkloadStatus.QUEUED).exclude(
                    pending_reason=decision.reason
                ).update(pending_reason=decision.reason)
        return result

