"""Writes of the deployments app: deployment keys, scaling."""
import time

from django.db import models, transaction
from django.utils import timezone

from apps.accounts.models import ApiToken, User
from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ConflictError, ServiceError
from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.lifecycle import workload_locked
from apps.workloads.models import Workload
from apps.workloads.services import workload_event_record

from .autoscaler import DEFAULT_PANIC_WINDOW, DEFAULT_STABLE_WINDOW, DEFAULT_TARGET, Policy, State, decide
from .decisions import forget as forget_decisions
from .metrics import window_reader
from .models import DeploymentKey, DeploymentRevision, DeploymentRollout, DeploymentScale


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


def _scale_row(workload: Workload) -> DeploymentScale:
    row, _ = DeploymentScale.objects.get_or_create(workload=workload, defaults={"desired": workload.replicas})
    return row


def deployment_scale_to(*, workload_id: int, desired: int, reason: str = "") -> Workload | None:
    """Ask for `desired` replicas of a running deployment. Fewer than admitted: the extra replicas
    are released at once (their quota with them; the reconciler drains and stops them). More: a
    scale-up request that the scheduler admits like any workload (quota, capacity, priority); until
    then the deployment's pending_reason says what it waits for."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None or workload.kind != Kind.DEPLOYMENT or workload.status != WorkloadStatus.RUNNING:
            return None
        row = _scale_row(workload)
        now = timezone.now()
        if desired < workload.replicas:
            before = workload.replicas
            placement = [p for p in workload.placement or [] if isinstance(p, dict) and p.get("replica", 0) < desired]
            Workload.objects.filter(pk=workload.pk).update(replicas=desired, placement=placement, pending_reason="",
                                                           waiting_on="", updated_at=now)
            workload.replicas, workload.placement = desired, placement
            workload_event_record(workload=workload, reason="ScaledDown",
                                  message=f"Scaled down from {before} to {desired} replica(s)"
                                          + (f" ({reason})." if reason else "."))
            row.requested_at, row.pending_reason = None, ""
        elif desired > workload.replicas:
            if row.desired <= workload.replicas or row.requested_at is None:
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


def deployment_scale_admit(*, workload_id: int, placement: list[dict]) -> Workload | None:
    """The scheduler admitted a scale-up: `placement` for the new replicas (numbered from 0 by
    the policy, renumbered here after the running ones). The reconciler starts them."""
    with transaction.atomic():
        workload = workload_locked(workload_id)
        if workload is None or workload.status != WorkloadStatus.RUNNING:
            return None
        row = _scale_row(workload)
        if row.desired <= workload.replicas:
            return None  # no longer wanted (scaled down meanwhile)
        before = workload.replicas
        added = [{**entry, "replica": before + i} for i, entry in enumerate(placement)]
        replicas = before + len(added)
        Workload.objects.filter(pk=workload.pk).update(
            replicas=replicas, placement=[*(workload.placement or []), *added], pending_reason="", waiting_on="",
            updated_at=timezone.now())
        workload.replicas = replicas
        row.requested_at, row.pending_reason = None, ""
        row.save(update_fields=["requested_at", "pending_reason", "updated_at"])
        workload_event_record(workload=workload, reason="ScaledUp",
                              message=f"Scaled up from {before} to {replicas} replica(s): admitted by the scheduler.")
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


def scale_ups_pending() -> list[tuple[Workload, int, DeploymentScale]]:
    """Running deployments that want more replicas than admitted: (workload, extra replicas, row)."""
    rows = (DeploymentScale.objects.filter(workload__status=WorkloadStatus.RUNNING, workload__kind=Kind.DEPLOYMENT,
                                           desired__gt=models.F("workload__replicas"))
            .select_related("workload__project", "workload__pool"))
    return [(row.workload, row.desired - row.workload.replicas, row) for row in rows]


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
    current = max(workload.replicas, row.desired) if row.requested_at else workload.replicas
    decision = decide(policy, now=now, current=current, samples=windows.get(workload.pk, []), state=state)
    DeploymentScale.objects.filter(pk=row.pk).update(
        panic_until=decision.state.panic_until, panic_peak=decision.state.panic_peak,
        last_demand=decision.state.last_demand,
        decision={"desired": decision.desired, "stable_concurrency": round(decision.stable_concurrency, 3),
                  "panic_concurrency": round(decision.panic_concurrency, 3), "panicking": decision.panicking,
                  "reason": decision.reason, "at": now})
    if decision.desired != row.desired or decision.desired != workload.replicas and not row.requested_at:
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

REVISION_FIELDS = ("command", "image", "env")


def revision_spec(workload: Workload) -> dict:
    spec = workload.spec or {}
    return {key: spec[key] for key in REVISION_FIELDS if key in spec}


def _ensure_first_revision(workload: Workload) -> DeploymentRollout:
    if not DeploymentRevision.objects.filter(workload=workload).exists():
        DeploymentRevision.objects.create(workload=workload, number=1, spec=revision_spec(workload))
    rollout, _ = DeploymentRollout.objects.get_or_create(workload=workload)
    return rollout


def deployment_revision_create(*, workload: Workload, changes: dict, strategy: str = "rolling",
                               canary_weight: int = 10, max_unavailable: int = 1,
                               user: User | None = None) -> DeploymentRevision:
    """A new revision of the deployment (its command, image or env changed). `rolling`: every
    replica is replaced by one of the new revision, `max_unavailable` at a time, each new one
    ready before the next goes. `canary`: the last replica runs it and gets `canary_weight`
    percent of the requests until it is promoted (rolled out to all) or rolled back."""
    if workload.kind != Kind.DEPLOYMENT:
        raise ServiceError("Revisions exist for deployments only.")
    with transaction.atomic():
        workload = workload_locked(workload.pk)
        if workload.status not in (WorkloadStatus.RUNNING, WorkloadStatus.QUEUED, WorkloadStatus.ADMITTED):
            raise ConflictError(f"The deployment is {workload.status}: only an active deployment gets revisions.")
        rollout = _ensure_first_revision(workload)
        if rollout.canary_revision is not None:
            raise ConflictError(f"Revision {rollout.canary_revision} is in canary: promote or roll it back first.")
        if strategy == "canary" and workload.replicas < 2:
            raise ServiceError("A canary needs at least 2 replicas (it runs on the last one).")
        current = DeploymentRevision.objects.get(workload=workload, number=rollout.stable_revision).spec
        spec = {**current, **{key: value for key, value in changes.items() if key in REVISION_FIELDS}}
        if spec == current:
            raise ServiceError("Nothing changed: a new revision needs another command, image or env.")
        number = (DeploymentRevision.objects.filter(workload=workload).aggregate(n=models.Max("number"))["n"] or 0) + 1
        revision = DeploymentRevision.objects.create(workload=workload, number=number, spec=spec, strategy=strategy,
                                                     created_by=user)
        rollout.max_unavailable = max_unavailable
        if strategy == "canary":
            rollout.canary_revision, rollout.canary_weight = number, canary_weight
            message = f"Revision {number}: canary on replica {workload.replicas - 1} with {canary_weight}% of requests."
        else:
            rollout.stable_revision, rollout.canary_revision, rollout.canary_weight = number, None, 0
            _apply_revision_spec(workload, spec)
            message = f"Revision {number}: rolling update, {max_unavailable} replica(s) at a time."
        rollout.save()
        workload_event_record(workload=workload, reason="RevisionCreated", message=message)
    return revision


def _apply_revision_spec(workload: Workload, spec: dict) -> None:
    """The workload's own spec follows its stable revision (a restart of the attempt runs it)."""
    merged = {**(workload.spec or {}), **spec}
    Workload.objects.filter(pk=workload.pk).update(spec=merged, updated_at=timezone.now())
    workload.spec = merged


def deployment_rollout_promote(*, workload: Workload) -> DeploymentRollout:
    """The canary revision becomes the stable one: rolled out to every replica."""
    with transaction.atomic():
        workload = workload_locked(workload.pk)
        rollout = DeploymentRollout.objects.filter(workload=workload).first()
        if rollout is None or rollout.canary_revision is None:
            raise ConflictError("No canary to promote.")
        number = rollout.canary_revision
        rollout.stable_revision, rollout.canary_revision, rollout.canary_weight = number, None, 0
        rollout.save()
        _apply_revision_spec(workload, DeploymentRevision.objects.get(workload=workload, number=number).spec)
        workload_event_record(workload=workload, reason="RolloutPromoted",
                              message=f"Revision {number} promoted: rolling it out to every replica.")
    return rollout


def deployment_rollout_rollback(*, workload: Workload) -> DeploymentRollout:
    """Back to the previous revision: a canary is withdrawn (its replica runs the stable revision
    again, it gets no more traffic); without a canary, the revision before the stable one is
    rolled out again."""
    with transaction.atomic():
        workload = workload_locked(workload.pk)
        rollout = DeploymentRollout.objects.filter(workload=workload).first()
        if rollout is None:
            raise ConflictError("This deployment has a single revision: nothing to roll back to.")
        if rollout.canary_revision is not None:
            withdrawn = rollout.canary_revision
            rollout.canary_revision, rollout.canary_weight = None, 0
            message = f"Canary revision {withdrawn} rolled back: revision {rollout.stable_revision} serves everything."
        else:
            previous = (DeploymentRevision.objects.filter(workload=workload, number__lt=rollout.stable_revision)
                        .order_by("-number").first())
            if previous is None:
                raise ConflictError("No earlier revision to roll back to.")
            message = f"Rolled back from revision {rollout.stable_revision} to revision {previous.number}."
            rollout.stable_revision = previous.number
            _apply_revision_spec(workload, previous.spec)
        rollout.save()
        workload_event_record(workload=workload, reason="RolloutRolledBack", message=message)
    return rollout
