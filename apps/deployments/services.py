"""Writes of the deployments app: deployment keys, scaling."""
import logging
import time

from django.db import models, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.accounts.models import ApiToken, User
from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.clusters.backends import backend_spec
from apps.core.errors import ConflictError, ServiceError
from apps.quotas.models import Quota
from apps.quotas.selectors import quota_usage
from apps.quotas.services import usage_close, usage_open
from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.lifecycle import workload_locked
from apps.workloads.models import Workload
from apps.workloads.runtime import Runtime
from apps.workloads.services import workload_event_record

from .autoscaler import DEFAULT_PANIC_WINDOW, DEFAULT_STABLE_WINDOW, DEFAULT_TARGET, Policy, State, decide
from .decisions import forget as forget_decisions
from .metrics import window_reader
from .models import DeploymentKey, DeploymentRevision, DeploymentRollout, DeploymentScale

logger = logging.getLogger(__name__)


def deployment_key_create(*, workload: Workload, name: str, created_by: User | None) -> tuple[DeploymentKey, str]:
    """Create a key for the deployment; return it and the full key, which is never stored or shown again."""
    if workload.kind != Kind.DEPLOYMENT:
        raise ServiceError("Keys exist for deployments only.")
    prefix, secret, full = DeploymentKey.generate()
    with transaction.atomic():
        key = DeploymentKey.objects.create(
            workload=workload, name=name, prefix=prefix, secret_hash=ApiToken.hash_secret(secret), created_by=created_by,
        )
        audit_record(action=AuditAction.DEPLOYMENT_KEY_CREATE, actor=created_by, project=workload.project, target=key,
                     details={"deployment": workload.name, "key_prefix": prefix})
    return key, full


def deployment_key_revoke(*, key: DeploymentKey, user: User | None = None) -> DeploymentKey:
    if key.revoked_at is not None:
        raise ConflictError("This key is already revoked.")
    with transaction.atomic():
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        transaction.on_commit(forget_decisions)  # this process stops honouring it at once
        audit_record(action=AuditAction.DEPLOYMENT_KEY_REVOKE, actor=user, project=key.workload.project, target=key,
                     details={"deployment": key.workload.name, "key_prefix": key.prefix})
    return key


# -- scaling: the autoscaler's decisions, and the scheduler's answers to a scale-up ------------------

def autoscaling_policy(workload: Workload) -> Policy | None:
    """The deployment's autoscaling settings (spec `autoscaling`), None when it has none."""
    conf = (workload.spec or {}).get("autoscaling")
    if not isinstance(conf, dict):
        return None
    return Policy(
        min_replicas=int(conf.get("min_replicas", 1)), max_replicas=int(conf.get("max_replicas", 1)),
        target=float(conf.get("target_concurrency", DEFAULT_TARGET)),
        stable_window=float(conf.get("stable_window_seconds", DEFAULT_STABLE_WINDOW)),
        panic_window=float(conf.get("panic_window_seconds", DEFAULT_PANIC_WINDOW)),
    )


def _surge_of(workload: Workload) -> int:
    """How many of the workload's admitted replicas are a rollout's surge (not the autoscaler's)."""
    return DeploymentRollout.objects.filter(workload=workload).values_list("surge", flat=True).first() or 0


def _scale_row(workload: Workload) -> DeploymentScale:
    row, _ = DeploymentScale.objects.get_or_create(
        workload=workload, defaults={"desired": workload.replicas - _surge_of(workload)})
    return row


def deployment_scale_to(*, workload_id: int, desired: int, reason: str = "") -> Workload | None:
    """Ask for `desired` replicas of a running deployment. Fewer than admitted: the extra replicas
    are released at once (their quota with them; the reconciler drains and stops them). More: a
    scale-up request that the scheduler admits like any workload (quota, capacity, priority); until
    then the deployment's pending_reason says what it waits for. A rollout's surge replicas come
    on top of `desired` and are not counted in it."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None or workload.kind != Kind.DEPLOYMENT or workload.status != WorkloadStatus.RUNNING:
            return None
        row = _scale_row(workload)
        now = timezone.now()
        surge = _surge_of(workload)
        base = workload.replicas - surge
        if desired < base:
            _release_replicas(workload, keep=desired + surge)
            workload_event_record(workload=workload, reason="ScaledDown",
                                  message=f"Scaled down from {base} to {desired} replica(s)"
                                          + (f" ({reason})." if reason else "."))
            row.requested_at, row.pending_reason = None, ""
        elif desired > base:
            if row.desired <= base or row.requested_at is None:
                row.requested_at = now
            if not row.pending_reason:
                row.pending_reason = f"Scaling up to {desired} replica(s): waiting for the scheduler."
                Workload.objects.filter(pk=workload.pk).update(pending_reason=row.pending_reason, updated_at=now)
        else:
            row.requested_at, row.pending_reason = None, ""
            if workload.pending_reason:
                Workload.objects.filter(pk=workload.pk).update(pending_reason="", waiting_on="", updated_at=now)
        row.desired = desired
        row.save()
    return workload


def _release_replicas(workload: Workload, *, keep: int) -> None:
    """Keep the first `keep` admitted replicas: the others' placement (and quota) is released at
    once; the reconciler drains and stops their processes."""
    placement = [p for p in workload.placement or [] if isinstance(p, dict) and p.get("replica", 0) < keep]
    Workload.objects.filter(pk=workload.pk).update(replicas=keep, placement=placement, pending_reason="",
                                                   waiting_on="", updated_at=timezone.now())
    workload.replicas, workload.placement = keep, placement


def deployment_scale_admit(*, workload_id: int, placement: list[dict]) -> Workload | None:
    """The scheduler admitted a scale-up: `placement` for the new replicas (numbered from 0 by
    the policy, renumbered here after the running ones). The reconciler starts them."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None or workload.status != WorkloadStatus.RUNNING:
            return None
        row = _scale_row(workload)
        rollout = DeploymentRollout.objects.filter(workload=workload).first()
        surge_wanted = rollout.surge_wanted if rollout else 0
        if row.desired + surge_wanted <= workload.replicas:
            return None  # no longer wanted (scaled down, or the rollout finished, meanwhile)
        before = workload.replicas
        added = [{**entry, "replica": before + i} for i, entry in enumerate(placement)]
        replicas = before + len(added)
        Workload.objects.filter(pk=workload.pk).update(
            replicas=replicas, placement=[*(workload.placement or []), *added], pending_reason="", waiting_on="",
            updated_at=timezone.now())
        workload.replicas = replicas
        row.requested_at, row.pending_reason = None, ""
        row.save(update_fields=["requested_at", "pending_reason", "updated_at"])
        surge_before = surge_after = rollout.surge if rollout else 0
        if rollout is not None and surge_wanted > rollout.surge:
            # The admitted replicas give the rollout what it asked for; the rest is the scale-up.
            surge_after = max(0, min(surge_wanted, replicas - row.desired))
            DeploymentRollout.objects.filter(pk=rollout.pk).update(surge=surge_after, surge_requested_at=None,
                                                                   pending_reason="", updated_at=timezone.now())
        if surge_after > surge_before:
            workload_event_record(workload=workload, reason="SurgeAdmitted",
                                  message=f"{surge_after - surge_before} surge replica(s) for the rollout admitted by "
                                          f"the scheduler: {replicas} replica(s) until it is complete.")
        if replicas - surge_after > before - surge_before:
            workload_event_record(workload=workload, reason="ScaledUp",
                                  message=f"Scaled up from {before - surge_before} to {replicas - surge_after} "
                                          "replica(s): admitted by the scheduler.")
    return workload


def deployment_scale_wait(*, workload_id: int, reason: str, waiting_on: str) -> None:
    """The scheduler keeps a scale-up waiting: say why, on the deployment."""
    text = f"Scale-up waits: {reason}"
    with transaction.atomic():
        # Lock order: the workload, then its scale row (as deployment_scale_to does), or a cold
        # start in the gateway and the scheduler's cycle deadlock on the two rows.
        if workload_locked(workload_id) is None:
            return
        Workload.objects.filter(pk=workload_id, status=WorkloadStatus.RUNNING).exclude(
            pending_reason=text, waiting_on=waiting_on).update(pending_reason=text, waiting_on=waiting_on)
        DeploymentScale.objects.filter(workload_id=workload_id).exclude(pending_reason=text).update(pending_reason=text)
        surge_text = f"The rollout's surge replica(s) wait: {reason}"
        DeploymentRollout.objects.filter(workload_id=workload_id, surge_wanted__gt=models.F("surge")).exclude(
            pending_reason=surge_text).update(pending_reason=surge_text)


def scale_ups_pending() -> list[tuple[Workload, int, DeploymentScale]]:
    """Running deployments that want more replicas than admitted, their autoscaler's or their
    rollout's surge: (workload, extra replicas, row; row.requested_at is when they were asked for)."""
    rows = (DeploymentScale.objects.filter(workload__status=WorkloadStatus.RUNNING, workload__kind=Kind.DEPLOYMENT)
            .annotate(surge_wanted=Coalesce("workload__rollout__surge_wanted", 0),
                      surge_at=models.F("workload__rollout__surge_requested_at"))
            .filter(workload__replicas__lt=models.F("desired") + models.F("surge_wanted"))
            .select_related("workload__project", "workload__pool"))
    pending = []
    for row in rows:
        if row.requested_at is None or (row.surge_at and row.surge_at < row.requested_at):
            row.requested_at = row.surge_at
        pending.append((row.workload, row.desired + row.surge_wanted - row.workload.replicas, row))
    return pending


def deployment_autoscale(*, now: float | None = None) -> int:
    """One autoscaler pass over the running deployments that have autoscaling: read their
    concurrency window (the telemetry's reader), decide (autoscaler.decide), apply. Returns how
    many changed their desired replicas."""
    now = time.time() if now is None else now
    workloads = [w for w in Workload.objects.filter(kind=Kind.DEPLOYMENT, status=WorkloadStatus.RUNNING)
                 .select_related("project") if autoscaling_policy(w) is not None]
    if not workloads:
        return 0
    reader = window_reader()
    longest = max(autoscaling_policy(w).stable_window for w in workloads)
    windows = reader([w.pk for w in workloads], now - longest) if reader else {}
    changed = 0
    for workload in workloads:
        with transaction.atomic():
            changed += _autoscale_one(workload, windows, now)
    return changed


def _autoscale_one(workload: Workload, windows: dict, now: float) -> int:
    # The workload's row is locked before its scale row, the order every writer keeps (a cold
    # start in the gateway takes them in this order too: the other order deadlocks).
    workload = workload_locked(workload.pk)
    if workload is None or workload.status != WorkloadStatus.RUNNING:
        return 0
    policy = autoscaling_policy(workload)
    row = _scale_row(workload)
    # A deployment nobody has called yet counts from its start: not scaled to zero at once.
    started = workload.started_at.timestamp() if workload.started_at else now
    state = State(panic_until=row.panic_until, panic_peak=row.panic_peak,
                  last_demand=row.last_demand if row.last_demand is not None else started)
    base = workload.replicas - _surge_of(workload)  # a rollout's surge is not the autoscaler's
    current = max(base, row.desired) if row.requested_at else base
    decision = decide(policy, now=now, current=current, samples=windows.get(workload.pk, []), state=state)
    DeploymentScale.objects.filter(pk=row.pk).update(
        panic_until=decision.state.panic_until, panic_peak=decision.state.panic_peak,
        last_demand=decision.state.last_demand,
        decision={"desired": decision.desired, "stable_concurrency": round(decision.stable_concurrency, 3),
                  "panic_concurrency": round(decision.panic_concurrency, 3), "panicking": decision.panicking,
                  "reason": decision.reason, "at": now})
    if decision.desired != row.desired or decision.desired != base and not row.requested_at:
        deployment_scale_to(workload_id=workload.pk, desired=decision.desired, reason=decision.reason)
        return 1
    return 0


def deployment_cold_start(*, workload_id: int) -> None:
    """A request arrived for a deployment scaled to zero: ask for one replica now (the gateway
    holds the request meanwhile), without waiting for the next autoscaler pass."""
    workload = Workload.objects.filter(pk=workload_id).first()
    if workload is None or workload.replicas > 0:
        return
    policy = autoscaling_policy(workload)
    if policy is None or policy.max_replicas < 1:
        return
    row = _scale_row(workload)
    if row.desired < 1:
        DeploymentScale.objects.filter(pk=row.pk).update(last_demand=time.time())
        deployment_scale_to(workload_id=workload_id, desired=1, reason="a request arrived")


# -- revisions and rollouts ------------------------------------------------------------------------

REVISION_FIELDS = ("command", "image", "env", "resources")
RESOURCE_FIELDS = ("gpu_milli", "cpu_milli", "memory_mb")  # per replica, the Workload's fields
_RESOURCE_WORDS = {"gpu_milli": ("GPU", 1000, ""), "cpu_milli": ("CPU", 1000, " cores"), "memory_mb": ("memory", 1, " MiB")}


def _resources(workload: Workload) -> dict:
    return {key: getattr(workload, key) for key in RESOURCE_FIELDS}


def revision_spec(workload: Workload) -> dict:
    spec = workload.spec or {}
    return {**{key: spec[key] for key in REVISION_FIELDS if key in spec}, "resources": _resources(workload)}


def _ensure_first_revision(workload: Workload) -> DeploymentRollout:
    if not DeploymentRevision.objects.filter(workload=workload).exists():
        DeploymentRevision.objects.create(workload=workload, number=1, spec=revision_spec(workload))
    # Revisions stored before resources were part of one all ran the workload's present size.
    for old in DeploymentRevision.objects.filter(workload=workload).exclude(spec__has_key="resources"):
        DeploymentRevision.objects.filter(pk=old.pk).update(spec={**old.spec, "resources": _resources(workload)})
    rollout, _ = DeploymentRollout.objects.get_or_create(workload=workload)
    return rollout


def _check_quota_for(workload: Workload, resources: dict, replicas: int) -> None:
    """Refuse (409) a size whose growth does not fit the project's nominal quota on the pool. A
    running deployment's replicas are resized without the scheduler, so they may not grow into
    borrowed quota (which could be reclaimed): growth must fit in what the project owns."""
    quota = Quota.objects.filter(project_id=workload.project_id, pool_id=workload.pool_id).first()
    if quota is None:
        raise ConflictError(f"Project '{workload.project.slug}' has no quota on pool '{workload.pool.name}' "
                            "any more: the deployment cannot be resized.")
    usage = quota_usage(quotas=[quota], queued=False)[quota.pk]
    held = {"gpu_milli": usage["allocated_gpu_milli"], "cpu_milli": usage["allocated_cpu_milli"],
            "memory_mb": usage["allocated_memory_mb"]}
    nominal = {"gpu_milli": quota.nominal_gpu_milli, "cpu_milli": quota.nominal_cpu_milli,
               "memory_mb": quota.nominal_memory_mb}
    short = []
    for key in RESOURCE_FIELDS:
        old, new = getattr(workload, key), int(resources.get(key, getattr(workload, key)))
        if new <= old:
            continue  # a replica that shrinks always fits
        total = held[key] - old * workload.replicas + new * replicas
        if total > nominal[key]:
            word, scale, unit = _RESOURCE_WORDS[key]
            short.append(f"{word} {total / scale:g}{unit} of {nominal[key] / scale:g}{unit} "
                         f"({replicas} replica(s) × {new / scale:g}{unit}, the project's other work "
                         f"{(held[key] - old * workload.replicas) / scale:g}{unit})")
    if short:
        raise ConflictError(f"The new size does not fit project '{workload.project.slug}''s quota on pool "
                            f"'{workload.pool.name}': it would need " + "; ".join(short) + ". Nothing was changed.")


def deployment_revision_create(*, workload: Workload, changes: dict, strategy: str = "rolling",
                               canary_weight: int = 10, max_unavailable: int = 1, max_surge: int = 0,
                               user: User | None = None) -> DeploymentRevision:
    """A new revision of the deployment (its command, image, env or resources changed).

    `rolling`: every replica is replaced by one of the new revision, at most `max_unavailable`
    below the deployment's replicas and `max_surge` above them at any time; each new one is ready
    before the next old one goes. Surge replicas are asked of the scheduler like a scale-up: until
    admitted, a rollout with `max_unavailable` 0 waits (its pending_reason says why).
    `canary`: the last replica runs it and gets `canary_weight` percent of the requests until it is
    promoted (rolled out to all) or rolled back; a single-replica deployment gets one surge replica
    for its canary. New resources are checked against the quota first (409, nothing changes)."""
    if workload.kind != Kind.DEPLOYMENT:
        raise ServiceError("Revisions exist for deployments only.")
    if max_unavailable < 1 and max_surge < 1:
        raise ServiceError("max_unavailable and max_surge cannot both be 0: the rollout could never replace a replica.")
    with transaction.atomic():
        workload = workload_locked(workload.pk)
        if workload.status not in (WorkloadStatus.RUNNING, WorkloadStatus.QUEUED, WorkloadStatus.ADMITTED):
            raise ConflictError(f"The deployment is {workload.status}: only an active deployment gets revisions.")
        rollout = _ensure_first_revision(workload)
        if rollout.canary_revision is not None:
            raise ConflictError(f"Revision {rollout.canary_revision} is in canary: promote or roll it back first.")
        if rollout.surge_wanted or rollout.surge:
            raise ConflictError("A rolling update with surge replicas is still in progress: wait until it is complete.")
        base = workload.replicas - rollout.surge
        if strategy == "canary" and base < 1:
            raise ServiceError("A canary needs a running replica: the deployment is scaled to zero.")
        current = DeploymentRevision.objects.get(workload=workload, number=rollout.stable_revision).spec
        spec = {**current, **{key: value for key, value in changes.items() if key in REVISION_FIELDS}}
        if "resources" in changes:
            spec["resources"] = {**current.get("resources", {}), **changes["resources"]}
        if spec == current:
            raise ServiceError("Nothing changed: a new revision needs another command, image, env or resources.")
        resized = spec.get("resources") != current.get("resources")
        if resized and strategy == "canary":
            raise ServiceError("A change of resources rolls out as a rolling update, not as a canary "
                               "(every replica of a deployment counts at one size in the quota).")
        if resized:
            _check_quota_for(workload, spec["resources"], workload.replicas)
        number = (DeploymentRevision.objects.filter(workload=workload).aggregate(n=models.Max("number"))["n"] or 0) + 1
        revision = DeploymentRevision.objects.create(workload=workload, number=number, spec=spec, strategy=strategy,
                                                     created_by=user)
        _scale_row(workload)  # a surge is asked for through it (scale_ups_pending)
        rollout.max_unavailable, rollout.max_surge, rollout.pending_reason = max_unavailable, max_surge, ""
        if strategy == "canary":
            rollout.canary_revision, rollout.canary_weight = number, canary_weight
            if base < 2:  # the canary runs on one surge replica; the stable one keeps serving
                rollout.surge_wanted, rollout.surge_requested_at = 1, timezone.now()
                message = (f"Revision {number}: canary with {canary_weight}% of requests on a surge replica "
                           "(asked of the scheduler).")
            else:
                message = f"Revision {number}: canary on replica {base - 1} with {canary_weight}% of requests."
        else:
            rollout.stable_revision, rollout.canary_revision, rollout.canary_weight = number, None, 0
            if max_surge:
                rollout.surge_wanted, rollout.surge_requested_at = max_surge, timezone.now()
            _apply_revision_spec(workload, spec)
            message = (f"Revision {number}: rolling update, at most {max_unavailable} replica(s) unavailable and "
                       f"{max_surge} surge replica(s)" + (", with new resources." if resized else "."))
        rollout.save()
        workload_event_record(workload=workload, reason="RevisionCreated", message=message)
    return revision


def _apply_revision_spec(workload: Workload, spec: dict) -> None:
    """The workload's own spec and size follow its stable revision (a restart of the attempt, and
    every replica started from now on, run it; the quota counts every replica at this size)."""
    merged = {**(workload.spec or {}), **{k: v for k, v in spec.items() if k != "resources"}}
    sizes = {key: int(value) for key, value in (spec.get("resources") or {}).items() if key in RESOURCE_FIELDS}
    resized = any(getattr(workload, key) != value for key, value in sizes.items())
    now = timezone.now()
    Workload.objects.filter(pk=workload.pk).update(spec=merged, updated_at=now, **sizes)
    workload.spec = merged
    for key, value in sizes.items():
        setattr(workload, key, value)
    if resized and usage_close(workload=workload, at=now):
        usage_open(workload=workload, at=now)  # the usage ledger charges the new size from now on


def deployment_rollout_promote(*, workload: Workload) -> DeploymentRollout:
    """The canary revision becomes the stable one: rolled out to every replica. A canary on a
    surge replica keeps it until the one stable replica is replaced (no moment without a ready one)."""
    with transaction.atomic():
        workload = workload_locked(workload.pk)
        rollout = DeploymentRollout.objects.filter(workload=workload).first()
        if rollout is None or rollout.canary_revision is None:
            raise ConflictError("No canary to promote.")
        number = rollout.canary_revision
        rollout.stable_revision, rollout.canary_revision, rollout.canary_weight = number, None, 0
        if rollout.surge_wanted:
            rollout.max_unavailable = 0
        rollout.save()
        _apply_revision_spec(workload, DeploymentRevision.objects.get(workload=workload, number=number).spec)
        workload_event_record(workload=workload, reason="RolloutPromoted",
                              message=f"Revision {number} promoted: rolling it out to every replica.")
    return rollout


def deployment_rollout_rollback(*, workload: Workload) -> DeploymentRollout:
    """Back to the previous revision: a canary is withdrawn (its replica runs the stable revision
    again, or its surge replica is released; it gets no more traffic); without a canary, the
    revision before the stable one is rolled out again (its size checked against the quota)."""
    with transaction.atomic():
        workload = workload_locked(workload.pk)
        rollout = DeploymentRollout.objects.filter(workload=workload).first()
        if rollout is None:
            raise ConflictError("This deployment has a single revision: nothing to roll back to.")
        if rollout.canary_revision is not None:
            withdrawn = rollout.canary_revision
            rollout.canary_revision, rollout.canary_weight = None, 0
            _end_surge(workload, rollout)
            message = f"Canary revision {withdrawn} rolled back: revision {rollout.stable_revision} serves everything."
        else:
            previous = (DeploymentRevision.objects.filter(workload=workload, number__lt=rollout.stable_revision)
                        .order_by("-number").first())
            if previous is None:
                raise ConflictError("No earlier revision to roll back to.")
            if previous.spec.get("resources") and previous.spec["resources"] != _resources(workload):
                _check_quota_for(workload, previous.spec["resources"], workload.replicas)
            message = f"Rolled back from revision {rollout.stable_revision} to revision {previous.number}."
            rollout.stable_revision = previous.number
            _end_surge(workload, rollout)
            _apply_revision_spec(workload, previous.spec)
        rollout.save()
        workload_event_record(workload=workload, reason="RolloutRolledBack", message=message)
    return rollout


def _end_surge(workload: Workload, rollout: DeploymentRollout) -> None:
    """The rollout wants no surge any more: withdraw the request, release admitted surge replicas
    (the top ones; the reconciler drains them). The caller holds the workload's lock and saves."""
    if rollout.surge:
        _release_replicas(workload, keep=workload.replicas - rollout.surge)
    rollout.surge_wanted = rollout.surge = 0
    rollout.surge_requested_at, rollout.pending_reason = None, ""
    if workload.pending_reason.startswith("Scale-up waits") and not DeploymentScale.objects.filter(
            workload=workload, desired__gt=workload.replicas).exists():
        Workload.objects.filter(pk=workload.pk).update(pending_reason="", waiting_on="")


def deployment_before_scheduling() -> None:
    """The deployments' work before each scheduling cycle (the kind's KindSpec.before_scheduling,
    run with the scheduler's leadership): an autoscaler pass, then the rollouts whose surge can be
    released, so the cycle's snapshot sees both. Each in its own transaction: a failure of one is
    logged and the other, and the cycle, go on."""
    try:
        with transaction.atomic():
            deployment_autoscale()
    except Exception:
        logger.exception("deployments: the autoscaler's pass failed; scheduling goes on")
    try:
        with transaction.atomic():
            deployment_rollouts_advance()
    except Exception:
        logger.exception("deployments: releasing the rollouts' surges failed; scheduling goes on")


def deployment_rollouts_advance() -> int:
    """Move rolling updates with surge on: each ready surge replica of the stable revision takes
    over an old replica's place (_take_over), and once every replica below the surge runs the
    stable revision and is ready the surge is released. Run with the scheduler's cycle. Returns
    how many ended."""
    ended = 0
    candidates = DeploymentRollout.objects.filter(
        models.Q(surge__gt=0) | models.Q(surge_wanted__gt=0), canary_revision__isnull=True,
        workload__status=WorkloadStatus.RUNNING).values_list("workload_id", flat=True)
    for workload_id in list(candidates):
        with transaction.atomic():
            workload = workload_locked(workload_id)  # the workload first, as every writer of its rows
            rollout = DeploymentRollout.objects.filter(workload_id=workload_id).first()
            if workload is None or rollout is None or rollout.canary_revision is not None:
                continue
            if not backend_spec(Runtime.of(workload).backend).rollout_progress and rollout.surge:
                _take_over(workload, rollout)
            if not _rolled_out(workload, rollout):
                continue
            released = rollout.surge
            _end_surge(workload, rollout)
            rollout.save()
            workload_event_record(workload=workload, reason="RolloutComplete",
                                  message=f"Every replica runs revision {rollout.stable_revision}"
                                          + (f": {released} surge replica(s) released." if released else "."))
            ended += 1
    return ended


def _rolled_out(workload: Workload, rollout: DeploymentRollout) -> bool:
    """Every replica below the surge runs the stable revision and is ready. On Kubernetes: the
    Deployment controller has rolled the stable revision out (the reconciler records its
    progress) and no canary pod is left."""
    runtime = Runtime.of(workload)
    if backend_spec(runtime.backend).rollout_progress:
        main = runtime.main_rollout or {}
        return bool(main.get("complete")) and main.get("revision") == rollout.stable_revision and not runtime.canary
    base = workload.replicas - rollout.surge
    records = {r.get("replica"): r for r in runtime.replicas}
    return all(records.get(i, {}).get("ready") and records[i].get("revision") == rollout.stable_revision
               for i in range(base))


def _take_over(workload: Workload, rollout: DeploymentRollout) -> int:
    """A surge replica that runs the stable revision and is ready takes the place (number and
    placement) of a replica below the surge that runs an older one: the old one is drained
    (out of the gateway's targets at once, SIGTERM after SERVE_DRAIN_SECONDS), the surge replica
    stays, and its own number is free again (the reconciler starts the next surge replica there
    while old ones are left; the last takeover leaves none to start, and the surge is released).
    So an update with surge starts as many new replicas as the deployment has. The process keeps
    its files (slot) and the number it started as (started_as, its CAIRN_REPLICA). The caller
    holds the workload's lock. Returns how many took over."""
    runtime = Runtime.of(workload)
    records = {r.get("replica"): dict(r) for r in runtime.replicas}
    base = workload.replicas - rollout.surge
    old = [j for j in range(base) if records.get(j, {}).get("ready") and records[j].get("revision") not in (
        None, rollout.stable_revision)]
    ready = [k for k in range(base, workload.replicas) if records.get(k, {}).get("ready")
             and records[k].get("revision") == rollout.stable_revision]
    swaps = list(zip(sorted(old, reverse=True), ready, strict=False))
    if not swaps:
        return 0
    now = time.time()
    draining = [dict(r) for r in runtime.draining]
    placement = {p.get("replica"): dict(p) for p in workload.placement or [] if isinstance(p, dict)}
    for j, k in swaps:
        successor = records.pop(k)
        draining.append({**records[j], "ready": False, "drain_started": now})
        records[j] = {**successor, "replica": j, "slot": successor.get("slot", k),
                      "started_as": successor.get("started_as", k)}
        if j in placement and k in placement:
            placement[j], placement[k] = {**placement[k], "replica": j}, {**placement[j], "replica": k}
    written = runtime.replace(replicas=[records[key] for key in sorted(records)], draining=draining).to_json()
    ordered = [placement[key] for key in sorted(placement)]
    Workload.objects.filter(pk=workload.pk).update(runtime=written, placement=ordered, updated_at=timezone.now())
    workload.runtime, workload.placement = written, ordered
    workload_event_record(workload=workload, reason="SurgeTookOver",
                          message="; ".join(f"Surge replica {k} (revision {rollout.stable_revision}) took the place of "
                                            f"replica {j}, which is drained" for j, k in swaps) + ".")
    return len(swaps)
