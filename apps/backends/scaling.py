"""Services whose replicas are independent (`KindSpec.independent_replicas`: deployments) on a
backend that declares `ReplicaScaling`: each replica is started, restarted and stopped on its own.

- `replicas_serve`, called by the shared reconcile step (apps.backends.services) before it looks
  for failures: scale to `workload.replicas` (drain the ones above it), roll replicas of another
  revision over (at most `max_unavailable` missing), start a lost replica again alone, and ask
  each live one whether it is ready (the kind's probe).

The records live in the workload's runtime ("replicas", "draining"); a record is what the
backend's `launch_replica` returned, with "ready" and "revision" added here.
"""
from __future__ import annotations

import logging
import time

from django.conf import settings

from apps.workloads.choices import EventType
from apps.workloads.kinds import kind_spec
from apps.workloads.lifecycle import workload_runtime_save
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record

from .base import Backend, LaunchError, ReplicaScaling, ReplicaState

logger = logging.getLogger(__name__)


def replicas_serve(workload: Workload, backend: Backend, states: list[ReplicaState]
                   ) -> tuple[bool, list[ReplicaState], bool]:
    """One step over a running service's replicas. Returns (acted, the states now, settled):
    settled when nothing is left for the failure handling (scaled to zero, or some replica runs)."""
    assert isinstance(backend, ReplicaScaling)
    kind = kind_spec(workload.kind)
    acted = False
    if _scale_replicas(workload, backend):
        states = backend.observe(workload)
        acted = True
    if not states and workload.replicas == 0:
        return acted, states, True  # scaled to zero: nothing runs, nothing to watch
    acted = _restart_replicas_alone(workload, backend, states) or acted
    if acted:
        states = backend.observe(workload)
    if kind.probe_ready is not None and _probe_readiness(workload, states, kind.probe_ready):
        acted = True
    return acted, states, any(state.alive for state in states)


def _scale_replicas(workload: Workload, backend: ReplicaScaling) -> bool:
    """Make a service's replicas match `workload.replicas` (changed by its autoscaler): start the
    missing ones, and drain the ones above it: out of the gateway's targets at once, SIGTERM after
    SERVE_DRAIN_SECONDS (requests in flight finish), SIGKILL after the stop grace period."""
    runtime = dict(workload.runtime or {})
    records = [r for r in runtime.get("replicas", []) if isinstance(r, dict)]
    draining = [dict(r) for r in runtime.get("draining", []) if isinstance(r, dict)]
    changed = False
    now = time.time()
    keep = [r for r in records if r.get("replica", 0) < workload.replicas]
    for record in records:
        if record.get("replica", 0) >= workload.replicas:
            draining.append({**record, "ready": False, "drain_started": now})
            changed = True
    # A rolling update: replicas of another revision than planned are replaced, at most
    # `max_unavailable` replicas missing or not ready at any time.
    plan_of = kind_spec(workload.kind).revision_plan
    max_unavailable, stable, plan = plan_of(workload) if plan_of else (1, 1, {})
    for record in keep:
        if "revision" not in record:  # started with the workload's own spec, its stable revision
            record["revision"] = stable
            changed = True
    unavailable = workload.replicas - sum(1 for r in keep if r.get("ready"))
    for record in sorted(keep, key=lambda r: (not r.get("ready"), r.get("replica", 0)), reverse=True):
        wanted = plan.get(record.get("replica"), (1, None))[0]
        if record["revision"] == wanted:
            continue
        if record.get("ready") and unavailable >= max_unavailable:
            continue
        keep.remove(record)
        draining.append({**record, "ready": False, "drain_started": now})
        unavailable += 1 if record.get("ready") else 0
        changed = True
    have = {r.get("replica") for r in keep}
    for replica in range(workload.replicas):
        if replica in have:
            continue
        revision, spec = plan.get(replica, (stable, None))
        try:
            keep.append({**backend.launch_replica(workload, replica=replica, spec=spec), "ready": False,
                         "revision": revision})
        except (OSError, LaunchError) as exc:
            logger.warning("reconciler: workload %s could not start replica %s: %s", workload.pk, replica, exc)
            continue
        changed = True
    still = []
    drain_seconds = float(settings.CAIRN.get("SERVE_DRAIN_SECONDS", 2.0))
    for record in draining:
        if not backend.replica_alive(record):
            changed = True
            continue
        if record.get("term_sent") is None and now - record["drain_started"] >= drain_seconds:
            backend.stop_replica(record)
            record["term_sent"] = now
            changed = True
        elif record.get("term_sent") is not None and now - record["term_sent"] >= float(settings.CAIRN["STOP_GRACE_SECONDS"]):
            backend.stop_replica(record, force=True)
        still.append(record)
    if not changed:
        return False
    runtime["replicas"] = sorted(keep, key=lambda r: r.get("replica", 0))
    runtime["draining"] = still
    workload_runtime_save(workload, runtime)
    return True


def _restart_replicas_alone(workload: Workload, backend: ReplicaScaling, states: list[ReplicaState]) -> bool:
    """A service's replica that is gone while others still run is started again on its own (the
    others keep serving, the gateway sends its requests elsewhere meanwhile). When none runs any
    more, the attempt as a whole fails and restarts as for any workload."""
    down = [state for state in states if not state.alive]
    if not down or len(down) == len(states):
        return False
    runtime = dict(workload.runtime or {})
    records = {r.get("replica"): r for r in runtime.get("replicas", []) if isinstance(r, dict)}
    replaced = []
    for state in down:
        old = records.get(state.replica) or {}
        try:
            record = backend.launch_replica(workload, replica=state.replica)
        except (OSError, LaunchError) as exc:
            logger.warning("reconciler: workload %s replica %s could not restart: %s", workload.pk, state.replica, exc)
            continue
        record["restarts"] = int(old.get("restarts", 0)) + 1
        records[state.replica] = record
        replaced.append((state, record))
    if not replaced:
        return False
    runtime["replicas"] = [records[key] for key in sorted(records, key=lambda r: (r is None, r))]
    workload_runtime_save(workload, runtime)
    for state, record in replaced:
        workload_event_record(workload=workload, reason="ReplicaRestarted", type=EventType.WARNING,
                              message=f"{state.describe()} Started it again (restart {record['restarts']}); "
                                      "the other replicas kept serving.")
    return True


def _probe_readiness(workload: Workload, states: list[ReplicaState], probe) -> bool:
    """Ask each live replica whether it is ready (kind's probe); record changes in runtime."""
    alive = {state.replica for state in states if state.alive}
    runtime = dict(workload.runtime or {})
    changed = False
    records = []
    for record in runtime.get("replicas", []):
        if isinstance(record, dict):
            try:
                ready = record.get("replica") in alive and bool(probe(workload, record))
            except Exception:  # noqa: BLE001 - a probe that breaks counts as not ready
                logger.exception("reconciler: readiness probe of workload %s", workload.pk)
                ready = False
            if record.get("ready") is not ready:
                record = {**record, "ready": ready}
                changed = True
        records.append(record)
    if changed:
        runtime["replicas"] = records
        workload_runtime_save(workload, runtime)
    return changed
