"""Self-healing of running training jobs (docs/training.md): hangs, stragglers, bad nodes.

Called by the reconciler on every pass over a RUNNING training job whose replicas all live.
It gathers what the backend and the SDK reported (each rank's progress, when its log last
grew, the health of the nodes it runs on), asks the pure rules in apps/training/health.py, and
returns the failure that ends the attempt (or None). The reconciler then stops the whole gang
(SIGTERM, SIGKILL after the grace period) and, once every rank is gone and the backoff has
passed, `decide()` (apps/workloads/lifecycle.py) restarts it from its last checkpoint (Hung) or
requeues it for the scheduler to place elsewhere (SlowNode, NodeUnhealthy), within max_restarts.
"""
from __future__ import annotations

import logging

from django.utils import timezone

from apps.clusters.choices import NodeHealth
from apps.clusters.models import Node
from apps.clusters.services import node_cordon
from apps.training.health import (
    DEFAULT_EVICT_FRACTION,
    RankActivity,
    StragglerRule,
    StragglerTracker,
    evictable,
    hang_timeout_of,
    hung_ranks,
)
from apps.training.selectors import progress_of_attempt, step_times
from apps.workloads.choices import EventType
from apps.workloads.kinds import kind_spec
from apps.workloads.lifecycle import workload_runtime_save
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record

from .base import Backend, ReplicaState

logger = logging.getLogger(__name__)

SLOW_NODE = "SlowNode"
ALERT, EVICT, OFF = "alert", "evict", "off"
STRAGGLER_POLICIES = (ALERT, EVICT, OFF)

def hang_timeout(workload: Workload) -> float:
    return hang_timeout_of(workload.spec)


def straggler_policy(workload: Workload) -> str:
    value = (workload.spec or {}).get("straggler_policy")
    return value if value in STRAGGLER_POLICIES else ALERT


def evict_fraction(workload: Workload) -> float:
    """The share of the gang one `evict` decision may remove (spec `straggler_evict_max_fraction`)."""
    value = (workload.spec or {}).get("straggler_evict_max_fraction")
    return float(value) if isinstance(value, int | float) and 0 < value <= 1 else DEFAULT_EVICT_FRACTION


def _where(workload: Workload, ranks) -> tuple[str, list[dict]]:
    """Where `ranks` run, in words and per rank (node, GPUs): what a slow group's ranks share."""
    entries = {e.get("replica"): e for e in workload.placement or [] if isinstance(e, dict)}
    rows = [{"replica": r, "node": entries.get(r, {}).get("node"), "gpus": list(entries.get(r, {}).get("gpus") or [])}
            for r in ranks]
    nodes = sorted({row["node"] for row in rows if row["node"]})
    if not nodes:
        return "", rows
    shared = {}
    for row in rows:
        for gpu in row["gpus"]:
            shared.setdefault((row["node"], gpu), []).append(row["replica"])
    sharing = [f"GPU {gpu} of {node} by {', '.join(map(str, rs))}" for (node, gpu), rs in sorted(shared.items())
               if len(rs) > 1]
    text = f" They run on {', '.join(nodes)}"
    text += f"; shared: {'; '.join(sharing)}" if sharing else ""
    if 0 < workload.gpu_milli < 1000:
        text += f"; each rank asks for {workload.gpu_milli / 1000:g} GPU (co-located with other work)"
    return text + ".", rows


def _node_of(workload: Workload, replica: int) -> str | None:
    for entry in workload.placement or []:
        if isinstance(entry, dict) and entry.get("replica") == replica:
            return entry.get("node")
    return None


def training_health_failure(workload: Workload, backend: Backend, states: list[ReplicaState]) -> dict | None:
    """The failure that ends this attempt, or None while it is healthy."""
    if not kind_spec(workload.kind).runs_to_completion or not states or not all(s.alive for s in states):
        return None
    return (_unhealthy_node(workload) or _hang(workload, backend, states) or _straggler(workload))


def _unhealthy_node(workload: Workload) -> dict | None:
    """A node of the placement that is unhealthy (GPU XID/ECC from telemetry, lost heartbeat) or
    cordoned as a SlowNode: the gang must move."""
    names = {e.get("node") for e in workload.placement or [] if isinstance(e, dict) and e.get("node")}
    if not names:
        return None
    nodes = Node.objects.filter(cluster_id=workload.pool.cluster_id, name__in=names).order_by("name")
    for node in nodes:
        bad = node.health == NodeHealth.UNHEALTHY or (not node.schedulable and node.cordon_reason == SLOW_NODE)
        if bad:
            why = node.cordon_reason or "unhealthy"
            reason = SLOW_NODE if node.cordon_reason == SLOW_NODE else "NodeUnhealthy"
            replicas = sorted(e["replica"] for e in workload.placement if e.get("node") == node.name)
            return {"replica": replicas[0] if replicas else None, "phase": "node", "exit_code": None,
                    "message": f"Node {node.name} is unhealthy ({why}); replica(s) "
                               f"{', '.join(map(str, replicas))} ran there.",
                    "restart_reason": reason, "move": True, "node": node.name}
    return None


def _hang(workload: Workload, backend: Backend, states: list[ReplicaState]) -> dict | None:
    attempt = workload.attempt
    progress = {row.replica: row for row in progress_of_attempt(workload_id=workload.pk, attempt=attempt)}
    if not progress or workload.started_at is None:
        return None
    timeout = hang_timeout(workload)
    ranks = [RankActivity(
        replica=state.replica,
        step_changed_at=progress[state.replica].step_changed_at.timestamp() if state.replica in progress else None,
        output_at=backend.last_output_at(workload, replica=state.replica, attempt=attempt),
        done=state.replica in progress and progress[state.replica].done,
    ) for state in states]
    hung = hung_ranks(ranks, now=timezone.now().timestamp(), started_at=workload.started_at.timestamp(),
                      timeout=timeout)
    if not hung:
        return None
    steps = ", ".join(f"{r} at step {progress[r].step}" if r in progress else f"{r} (no step reported)" for r in hung)
    message = (f"Hung: replica(s) {steps} made no step progress and wrote no output for {timeout:g}s "
               f"(hang_timeout_seconds).")
    try:
        # Every rank's stacks: the stuck one's, and where its peers wait for it (a collective).
        diagnosis = backend.diagnose(workload, replicas=[state.replica for state in states])
    except Exception as exc:  # the diagnosis must not stop the restart
        logger.exception("diagnosis of workload %s failed", workload.pk)
        diagnosis = f"The diagnosis failed: {exc}"
    workload_event_record(workload=workload, reason="Hung", type=EventType.WARNING, attachment=diagnosis,
                          message=f"{message} Their Python stacks are attached; the gang is stopped and restarted "
                                  "from the last checkpoint.")
    return {"replica": hung[0], "phase": "hung", "exit_code": None, "message": message, "restart_reason": "Hung"}


def _straggler(workload: Workload) -> dict | None:
    policy = straggler_policy(workload)
    if policy == OFF or workload.replicas < 2:
        return None
    rows = progress_of_attempt(workload_id=workload.pk, attempt=workload.attempt)
    if len(rows) < workload.replicas:
        return None
    runtime = workload.runtime or {}
    tracker = StragglerTracker(StragglerRule(), dict(runtime.get("straggler_state") or {}))
    found = tracker.update(step_times(rows))
    if tracker.state == (runtime.get("straggler_state") or {}):
        return None
    saved = {**runtime, "straggler_state": tracker.state, "stragglers": tracker.state.get("stragglers", [])}
    for group in found.groups:
        where, placed = _where(workload, group.ranks)
        saved.setdefault("slow_groups", []).append({**group.as_json(), "placement": placed})
        workload_event_record(workload=workload, reason="SlowGroup", type=EventType.WARNING,
                              message=group.describe() + where)
    if found.slowdown is not None:
        saved["slowdown"] = found.slowdown.as_json()
        workload_event_record(workload=workload, reason="JobSlowdown", type=EventType.WARNING,
                              message=found.slowdown.describe())
    workload_runtime_save(workload, saved)
    new = list(found.stragglers)
    if not new:
        return None
    # Eviction safety: a few bad nodes are evicted; half a gang or a whole speed group is not.
    allowed, why = [], None
    if policy == EVICT:
        reference = tracker.reference
        allowed, why = evictable([s.replica for s in new], replicas=workload.replicas,
                                 groups=[g.ranks for g in reference.groups] if reference else [],
                                 fraction=evict_fraction(workload))
    for straggler in new:
        node = _node_of(workload, straggler.replica)
        where = f" on node {node}" if node else ""
        if straggler.replica in allowed and node:
            action = "Its node is cordoned (SlowNode) and the gang restarts from the last checkpoint elsewhere."
        elif why:
            action = f"Not evicted: {why} The job keeps running."
        else:
            action = "Policy alert: the job keeps running."
        workload_event_record(workload=workload, reason="Straggler", type=EventType.WARNING,
                              message=f"{straggler.describe()[:-1]}{where}. {action}")
    evicted = [(s, node) for s in new if s.replica in allowed and (node := _node_of(workload, s.replica))]
    cordoned = []
    for straggler, node_name in evicted:
        node = Node.objects.filter(cluster_id=workload.pool.cluster_id, name=node_name).first()
        if node is None:
            continue
        if node_name not in cordoned:
            node_cordon(node=node, reason=SLOW_NODE, message=f"{straggler.describe()} (workload {workload.pk}).")
            cordoned.append(node_name)
    if not cordoned:
        return None
    first = next(s for s, n in evicted if n == cordoned[0])
    names = ", ".join(cordoned)
    return {"replica": first.replica, "phase": "slow", "exit_code": None,
            "message": " ".join(s.describe() for s, n in evicted if n in cordoned) + f" Node {names} cordoned (SlowNode).",
            "restart_reason": SLOW_NODE, "move": True, "node": cordoned[0]}
