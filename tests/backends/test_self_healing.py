"""Self-healing training, end to end with real processes: examples/ddp_train.py on 2 ranks (PyTorch
DDP, gloo on CPU) under the local backend, reporting to a real Cairn server process.

- SIGKILL one rank: the gang restarts and the loss continues from the checkpointed step (both
  attempts in tracking);
- SIGSTOP one rank: hung after the job's hang_timeout, stacks recorded, gang restarted;
- a rank slowed by an injected sleep per step: flagged as a straggler within the bound; in evict
  mode its (simulated) node is cordoned SlowNode and the job resumes from its checkpoint on another.
"""
import os
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone

from apps.backends.local.stacks import command_process
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.clusters.models import Node
from apps.scheduling.services import scheduling_cycle
from apps.tracking.models import Run
from apps.training.health import StragglerRule
from apps.training.models import Checkpoint
from apps.workloads.choices import Kind, WorkloadStatus
from tests.backends.helpers import reconcile_until, wait_for
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory
from tests.sdk.test_tracking_roundtrip import Server, _free_port
from tests.tracking.factories import stored_points

S = WorkloadStatus
pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DDP = str(Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py")


@pytest.fixture
def cairn_server(tmp_path, settings):
    server = Server(tmp_path, _free_port())
    server.start()
    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": server.url, "STOP_GRACE_SECONDS": 1.0,
                      "RESTART_BACKOFF_SECONDS": 0.2}
    yield server
    server.stop()


@pytest.fixture
def nodes(pool, shared_dir):
    """Three simulated nodes of the local pool, each with room for one rank."""
    pool.allowed_paths = [str(shared_dir), str(Path(DDP).parent)]
    pool.save(update_fields=["allowed_paths"])
    return [NodeFactory(pool=pool, name=name, cpu_milli_allocatable=1000, memory_mb_allocatable=4096)
            for name in ("node-a", "node-b", "node-c")]


def _ddp_job(pool, *, nodes=("node-a", "node-b"), env=None, **spec):
    return WorkloadFactory(
        pool=pool, kind=Kind.TRAINING, replicas=2, cpu_milli=1000, memory_mb=2048, max_restarts=2,
        status=S.ADMITTED, admitted_at=timezone.now(),
        placement=[{"replica": i, "node": n} for i, n in enumerate(nodes)],
        spec={"command": ["python", DDP], "env": {"STEP_SECONDS": "0.05", "CHECKPOINT_EVERY": "10", **(env or {})},
              **spec},
    )


def _rank_process(workload, replica):
    record = next(r for r in workload.runtime["replicas"] if r["replica"] == replica)
    return wait_for(lambda: command_process(record["pid"], record["create_time"]), what="the rank's process")


def _checkpointed(workload, *, at_least):
    return wait_for(lambda: Checkpoint.objects.filter(workload=workload, step__gte=at_least).exists(), timeout=120,
                    what=f"a checkpoint at step {at_least} or later")


def _loss_steps(workload, attempt):
    run = Run.objects.get(workload=workload, attempt=attempt)
    return sorted(step for _, step, _ in stored_points(run, key="loss"))


def test_a_killed_rank_restarts_the_gang_and_the_loss_continues_from_the_checkpoint(cairn_server, nodes, pool):
    workload = _ddp_job(pool, env={"STEPS": "80"})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    _checkpointed(workload, at_least=29)
    os.kill(_rank_process(workload, 1).pid, signal.SIGKILL)

    reconcile_until(workload, S.SUCCEEDED, timeout=240)
    assert workload.attempt == 2
    resumed_from = max(Checkpoint.objects.filter(workload=workload, attempt=1).values_list("step", flat=True))
    assert resumed_from >= 29
    log = workload_log_read(workload=workload, replica=0, attempt=2)
    assert f"starting at step {resumed_from + 1} from checkpoint step-{resumed_from:08d}" in log, log
    # The last tracking batch may still be on its way when the process has exited.
    try:
        second = wait_for(lambda: (steps := _loss_steps(workload, 2)) and steps[-1] == 79 and steps, timeout=30,
                          what="the second attempt's loss up to step 79")
    except AssertionError:
        raise AssertionError(f"attempt 2 logged {_loss_steps(workload, 2)}; its log: "
                             f"{workload_log_read(workload=workload, replica=0, attempt=2)}") from None
    first = _loss_steps(workload, 1)
    # Attempt 1 was killed: its last buffered points (up to a second of steps) may be lost with it.
    assert first[0] == 0 and first == list(range(first[-1] + 1)) and first[-1] >= resumed_from - 20
    assert second[0] == resumed_from + 1  # not from step 0
    restart = workload.events.get(reason="Restarting")
    assert "killed by signal 9" in restart.message


def test_a_stopped_rank_is_hung_after_the_timeout_its_stacks_are_recorded_and_the_gang_restarts(
        cairn_server, nodes, pool):
    workload = _ddp_job(pool, env={"STEPS": "60"}, hang_timeout_seconds=6)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    _checkpointed(workload, at_least=19)
    stopped = _rank_process(workload, 1)
    os.kill(stopped.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        reconcile_until(workload, S.RUNNING, timeout=90, condition=lambda w: w.attempt == 2)
    finally:
        try:
            os.kill(stopped.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert time.monotonic() - stopped_at >= 6  # not before the timeout
    hung = workload.events.exclude(attachment="").get(reason="Hung")  # the diagnosis
    assert "no step progress and wrote no output for 6s" in hung.message
    assert "=== replica 1 (pid" in hung.attachment and "=== replica 0 (pid" in hung.attachment
    # the rank still running (blocked in the all-reduce) gave its Python stack
    assert "ddp_train.py" in hung.attachment, hung.attachment
    restart = workload.events.filter(reason="Hung", attachment="").get()  # the restart it caused
    assert "Starting attempt 2 of 3 from the last checkpoint" in restart.message
    reconcile_until(workload, S.SUCCEEDED, timeout=180)
    assert workload.attempt == 2, list(workload.events.values_list("reason", "message"))
    assert "from checkpoint" in workload_log_read(workload=workload, replica=0, attempt=2)


def test_a_slow_rank_is_flagged_as_a_straggler_and_alert_keeps_the_job_running(cairn_server, nodes, pool):
    workload = _ddp_job(pool, env={"STEPS": "60", "SLOW_NODE": "node-b", "SLOW_SECONDS": "0.25"},
                        straggler_policy="alert")
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    reconcile_until(workload, S.RUNNING, timeout=120,
                    condition=lambda w: w.events.filter(reason="Straggler").exists())
    event = workload.events.get(reason="Straggler")
    assert "Replica 1 is a straggler" in event.message and "node node-b" in event.message
    flagged_at = max(step for step, _ in workload.replica_progress.get(replica=1).recent)
    assert flagged_at <= StragglerRule().window + 15  # within the bound (plus reporting and reconcile delay)
    assert Node.objects.get(name="node-b").schedulable  # alert: nothing cordoned
    reconcile_until(workload, S.SUCCEEDED, timeout=180)
    assert workload.attempt == 1


def test_evict_cordons_the_slow_node_and_the_job_resumes_from_its_checkpoint_elsewhere(cairn_server, nodes, pool):
    workload = _ddp_job(pool, env={"STEPS": "70", "SLOW_NODE": "node-b", "SLOW_SECONDS": "0.25", "CHECKPOINT_EVERY": "5"},
                        straggler_policy="evict")
    QuotaFactory(project=workload.project, pool=pool)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    reconcile_until(workload, S.QUEUED, timeout=180)
    node_b = Node.objects.get(name="node-b")
    assert (node_b.schedulable, node_b.cordon_reason) == (False, "SlowNode")
    assert workload.status_reason == "SlowNode" and "another node" in workload.status_message
    checkpointed = list(Checkpoint.objects.filter(workload=workload).values_list("step", flat=True))
    assert checkpointed, "no checkpoint before the eviction"

    scheduling_cycle()
    workload.refresh_from_db()
    assert workload.status == S.ADMITTED, workload.pending_reason
    assert sorted(p["node"] for p in workload.placement) == ["node-a", "node-c"]
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=180)
    assert workload.attempt == 2
    log = workload_log_read(workload=workload, replica=0, attempt=2)
    assert f"starting at step {max(checkpointed) + 1} from checkpoint" in log, log
    assert not workload.events.filter(reason="Straggler", created_at__gt=workload.started_at).exists()
