"""How the policy decides is one value, PolicyOptions: built from settings by the service, from
arguments by the simulator, from variants by the benchmarks; a variant changes decisions without
touching a class. A deployment's scale-up is a ScaleUp under its workload's own id, and the
deployments' autoscaler and rollouts reach the scheduler through their kind's hooks."""
import ast
import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from apps.deployments.models import DeploymentScale
from apps.deployments.services import deployment_before_scheduling
from apps.scheduling.policy import (
    DEFAULT_GPU_NODE_RESERVE,
    DEFAULT_REPREEMPT_MIN_RUNTIME,
    DEFAULT_STARVATION_SECONDS,
    DEFAULT_TIMESLICE_SECONDS,
    SERVICE_OPTIONS,
    Admit,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Preempt,
    QuotaState,
    Resources,
    RunningWorkload,
    ScaleUp,
    Snapshot,
    Wait,
    WaitKind,
    scale_up_ids,
    schedule,
)
from apps.scheduling.policy.backfill import Backfill
from apps.scheduling.policy.cycle import Cycle
from apps.scheduling.policy.ordering import Ordering
from apps.scheduling.policy.placement import Pool
from apps.scheduling.policy.preemption import Preemption
from apps.scheduling.policy.reasons import Reasons
from apps.scheduling.services import policy_options, scheduling_cycle, scheduling_snapshot
from apps.scheduling.simulation import SimJob, equal_quotas, simulate
from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.kinds import kind_spec
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1)
GPU8 = Resources(8000, 8000, 8192)


def _class_state():
    """Everything the policy's classes hold: a variant must leave all of it as it was."""
    return {cls.__name__: dict(vars(cls)) for cls in (Cycle, Ordering, Preemption, Backfill, Reasons, Pool)}


def _slice_snapshot() -> Snapshot:
    # One 8-GPU node held for 5 h by project a's P3 job; a's whole-node P3 job has waited 2 h.
    node = NodeState(name="n1", pool="p", allocatable=Resources(8000, 64000, 65536), gpu_model="A100")
    long = RunningWorkload(id=10, project="a", pool="p", priority=3, per_replica=GPU8,
                           placement=({"replica": 0, "node": "n1", "gpus": list(range(8))},),
                           admitted_at=T0 - timedelta(hours=5))
    waiting = PendingWorkload(id=1, project="a", pool="p", priority=3, submitted_at=T0 - timedelta(hours=2),
                              replicas=1, per_replica=GPU8)
    quotas = [QuotaState(project="a", pool="p", nominal=Resources(100_000, 10**6, 10**7))]
    return Snapshot([node], quotas, [waiting], running=[long], now=T0)


def test_the_options_are_one_frozen_value_the_bare_policy_by_default_and_the_services_defaults_apart():
    bare = PolicyOptions()
    assert (bare.starvation_seconds, bare.timeslice_seconds, bare.gpu_node_reserve) == (None, 0.0, 0.0)
    assert bare.timeslice and bare.youngest_first and bare.candidates == 12  # the rules in force
    with pytest.raises(dataclasses.FrozenInstanceError):
        bare.timeslice = False
    assert (SERVICE_OPTIONS.starvation_seconds, SERVICE_OPTIONS.timeslice_seconds, SERVICE_OPTIONS.gpu_node_reserve,
            SERVICE_OPTIONS.repreempt_min_runtime_seconds) == (
        DEFAULT_STARVATION_SECONDS, DEFAULT_TIMESLICE_SECONDS, DEFAULT_GPU_NODE_RESERVE, DEFAULT_REPREEMPT_MIN_RUNTIME)
    # Snapshot holds the cluster's state only: no setting, switch or constant is one of its fields.
    assert not {f.name for f in dataclasses.fields(Snapshot)} & {f.name for f in dataclasses.fields(PolicyOptions)}


def test_a_rule_switch_changes_a_decision_through_the_options_alone():
    before = _class_state()
    options = PolicyOptions(starvation_seconds=3600, timeslice_seconds=4 * 3600)
    sliced = schedule(_slice_snapshot(), options)
    assert [d.workload_id for d in sliced if isinstance(d, Preempt)] == [10]
    unsliced = schedule(_slice_snapshot(), dataclasses.replace(options, timeslice=False))
    assert not any(isinstance(d, Preempt) for d in unsliced)
    assert schedule(_slice_snapshot(), options) == sliced  # nothing carried over from the variant
    assert _class_state() == before


def test_a_variant_changes_the_simulators_decisions_without_touching_a_class():
    # a's whole-node job arrives behind its own 10-hour one; b's small CPU jobs make cycles happen.
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(8000, 64000, 65536))]
    jobs = [SimJob(id=1, project="a", arrival=0.0, duration=10 * 3600.0, per_replica=GPU8),
            SimJob(id=2, project="a", arrival=60.0, duration=3600.0, per_replica=GPU8)]
    jobs += [SimJob(id=10 + i, project="b", arrival=1800.0 * i, duration=60.0, per_replica=Resources(0, 1000, 1024))
             for i in range(1, 14)]
    quotas = equal_quotas(nodes, ["a", "b"])
    before = _class_state()
    served = simulate(nodes=nodes, quotas=quotas, jobs=jobs, known_durations=False)
    unsliced = simulate(nodes=nodes, quotas=quotas, jobs=jobs, known_durations=False,
                        options=dataclasses.replace(SERVICE_OPTIONS, timeslice=False))
    assert served.preemptions == served.preemptions_within_project == 1  # a's long job lost its node at 4 h
    assert unsliced.preemptions == 0
    assert unsliced.finish_times[1] < served.finish_times[1]  # the slice cost it its grace period
    assert _class_state() == before


def test_a_scale_up_is_decided_under_its_workloads_id_and_awaits_its_victims_like_any_preemptor():
    node = NodeState(name="n1", pool="p", allocatable=Resources(2000, 16000, 16384))
    one = Resources(1000, 1000, 1024)
    serving = RunningWorkload(id=5, project="a", pool="p", priority=1, per_replica=one,
                              placement=({"replica": 0, "node": "n1", "gpus": [0]},), admitted_at=T0)
    batch = RunningWorkload(id=6, project="a", pool="p", priority=4, per_replica=one,
                            placement=({"replica": 0, "node": "n1", "gpus": [1]},), admitted_at=T0)
    more = ScaleUp(id=5, project="a", pool="p", priority=1, submitted_at=T0, replicas=1, per_replica=one)
    quotas = [QuotaState(project="a", pool="p", nominal=Resources(8000, 10**6, 10**7))]
    snapshot = Snapshot([node], quotas, [more], running=[serving, batch], now=T0)
    assert scale_up_ids(snapshot) == frozenset({5})
    decisions = schedule(snapshot)
    # Its lower-priority neighbour makes room, never the deployment itself (same id, same project).
    assert [(d.workload_id, d.preemptor_id) for d in decisions if isinstance(d, Preempt)] == [(6, 5)]
    stopping = dataclasses.replace(batch, stopping=True, preempted_for=5)
    [wait] = schedule(Snapshot([node], quotas, [more], running=[serving, stopping], now=T0))
    assert isinstance(wait, Wait) and wait.workload_id == 5 and wait.kind == WaitKind.PREEMPTING
    [admit] = schedule(Snapshot([node], quotas, [more], running=[serving], now=T0))
    assert isinstance(admit, Admit) and admit.placement == [{"replica": 0, "node": "n1", "gpus": [1]}]


# -- the service ----------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_service_builds_its_options_from_the_settings_and_the_pools(settings, pool):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 12, "REPREEMPT_MIN_RUNTIME_SECONDS": 600,
                      "STARVATION_SECONDS": 7200, "TIMESLICE_SECONDS": 0, "GPU_NODE_RESERVE": 0.25}
    pool.locality_wait_seconds = 45
    pool.save(update_fields=["locality_wait_seconds"])
    options = policy_options()
    assert (options.grace_seconds, options.repreempt_min_runtime_seconds, options.starvation_seconds,
            options.timeslice_seconds, options.gpu_node_reserve) == (12.0, 600.0, 7200.0, 0.0, 0.25)
    assert options.locality_wait == {pool.name: 45.0}
    # What no setting names is the service's default.
    assert dataclasses.replace(options, grace_seconds=SERVICE_OPTIONS.grace_seconds,
                               repreempt_min_runtime_seconds=SERVICE_OPTIONS.repreempt_min_runtime_seconds,
                               starvation_seconds=SERVICE_OPTIONS.starvation_seconds,
                               timeslice_seconds=SERVICE_OPTIONS.timeslice_seconds,
                               gpu_node_reserve=SERVICE_OPTIONS.gpu_node_reserve, locality_wait=None) == SERVICE_OPTIONS


def _deployment(project, pool, *, desired: int, autoscaling=None):
    spec = {"command": ["python", "-c", "pass"], "env": {}}
    if autoscaling:
        spec["autoscaling"] = autoscaling
    workload = WorkloadFactory(project=project, pool=pool, kind=Kind.DEPLOYMENT, status=WorkloadStatus.RUNNING,
                               replicas=1, gpu_milli=1000, spec=spec, placement=[{"replica": 0, "node": "n1", "gpus": [0]}])
    DeploymentScale.objects.create(workload=workload, desired=desired)
    return workload


@pytest.mark.django_db(transaction=True)
def test_a_scale_up_is_applied_by_its_kind_under_its_workloads_id(project, pool):
    NodeFactory(pool=pool, name="n1", gpu_count=2, cpu_milli_allocatable=16000, memory_mb_allocatable=65536)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=2000)
    workload = _deployment(project, pool, desired=2)
    [asked] = [w for w in scheduling_snapshot().pending if isinstance(w, ScaleUp)]
    assert (asked.id, asked.replicas) == (workload.pk, 1)
    result = scheduling_cycle()
    assert result.admitted == 1
    workload.refresh_from_db()
    assert workload.replicas == 2
    assert workload.placement == [{"replica": 0, "node": "n1", "gpus": [0]}, {"replica": 1, "node": "n1", "gpus": [1]}]
    assert workload.events.filter(reason="ScaledUp").exists()
    assert not [w for w in scheduling_snapshot().pending if isinstance(w, ScaleUp)]


@pytest.mark.django_db(transaction=True)
def test_the_deployments_autoscaler_runs_before_each_cycle_through_its_kind_hook(project, pool):
    NodeFactory(pool=pool, name="n1", gpu_count=2)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=2000)
    workload = _deployment(project, pool, desired=1, autoscaling={"min_replicas": 1, "max_replicas": 2})
    assert kind_spec(Kind.DEPLOYMENT).before_scheduling is deployment_before_scheduling
    assert scheduling_cycle().ran
    assert DeploymentScale.objects.get(workload=workload).decision, "the cycle did not run the autoscaler"


def test_the_scheduler_imports_no_deployment_code():
    tree = ast.parse((ROOT / "apps" / "scheduling" / "services.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [m for m in modules if m and m.startswith("apps.deployments")]
