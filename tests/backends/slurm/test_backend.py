"""The Slurm backend against a real Slurm (testbed.py): Cairn's placement realised as one job per
attempt and one step per rank, status from squeue and the ranks' exit files, stop by scancel
--signal=TERM then KILL, node inventory from sinfo, registration in the admin. Success, failure
and restart, stop, preemption and a gang of 2 are the parity scenarios (test_lifecycle_parity.py)."""
import pytest

from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.clusters.forms import ClusterForm
from apps.clusters.models import Node
from apps.workloads.services import workload_stop

from .conftest import on_slurm, reconcile_slurm_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_nodes_gpus_and_cpus_come_from_sinfo(slurm_cluster):
    nodes = {n.name: n for n in Node.objects.filter(cluster=slurm_cluster)}
    assert sorted(nodes) == ["sn1", "sn2", "sn3"]
    assert (nodes["sn1"].gpu_count, nodes["sn1"].gpu_model, nodes["sn1"].cpu_milli_allocatable) == (2, "h100", 8000)
    assert nodes["sn3"].gpu_count == 0 and all(n.schedulable and n.pool is not None for n in nodes.values())


def test_a_gang_of_two_runs_one_step_per_rank_on_the_nodes_cairn_chose(slurm, slurm_pool, script):
    path = script("""
        import os
        keys = ("RANK", "WORLD_SIZE", "NODE_RANK", "LOCAL_RANK", "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES", "CAIRN_NODE")
        print(" ".join(f"{k}={os.environ.get(k)}" for k in keys), flush=True)
    """)
    workload = on_slurm(slurm_pool, nodes=("sn2", "sn1"), gpu_milli=1000, spec={"command": ["python", path]})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == "running" and workload.runtime["job"]
    workload = reconcile_slurm_until(workload, "succeeded")
    gpus = "0" if slurm.device_files else "None"  # bound by Slurm from the GRES, not set by Cairn
    assert workload_log_read(workload=workload, replica=0).strip() == (
        f"RANK=0 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=0 SLURMD_NODENAME=sn2 CUDA_VISIBLE_DEVICES={gpus} CAIRN_NODE=sn2")
    assert workload_log_read(workload=workload, replica=1).strip() == (
        f"RANK=1 WORLD_SIZE=2 NODE_RANK=1 LOCAL_RANK=0 SLURMD_NODENAME=sn1 CUDA_VISIBLE_DEVICES={gpus} CAIRN_NODE=sn1")
    assert (workload.status_reason, workload.exit_code) == ("Succeeded", 0)


def test_a_rank_that_ignores_sigterm_is_killed_after_the_grace_period(slurm_pool, script):
    path = script("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(120)
    """)
    workload = on_slurm(slurm_pool, nodes=("sn3",), spec={"command": ["python", path]})
    workload_dispatch(workload_id=workload.pk)
    reconcile_slurm_until(workload, "running", condition=lambda w: "ready" in workload_log_read(workload=w))
    workload_stop(workload=workload)
    workload_stop_signal(workload_id=workload.pk)
    workload = reconcile_slurm_until(workload, "stopped", timeout=30)
    assert workload.kill_sent_at is not None
    assert workload.status_message == "Replicas were killed after the 3s grace period."


def test_a_slurm_cluster_is_registered_in_the_admin_with_a_checked_config(slurm):
    refused = ClusterForm(data={"name": "hpc2", "backend": "slurm", "config": "{\"partition\": \"cairn\"}"})
    assert not refused.is_valid() and "needs config.slurm_conf" in str(refused.errors["config"])
    unknown = ClusterForm(data={"name": "hpc2", "backend": "slurm",
                                "config": f"{{\"slurm_conf\": \"{slurm.conf}\", \"queue\": \"x\"}}"})
    assert not unknown.is_valid() and "Unknown Slurm config key(s): queue" in str(unknown.errors["config"])
    form = ClusterForm(data={"name": "hpc2", "backend": "slurm", "config": f"{{\"slurm_conf\": \"{slurm.conf}\"}}"})
    assert form.is_valid(), form.errors
    cluster = form.save()
    assert (cluster.backend, cluster.config) == ("slurm", {"slurm_conf": str(slurm.conf)})
