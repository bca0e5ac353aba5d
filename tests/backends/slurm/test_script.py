"""Pure parts of the Slurm backend: the sbatch arguments and batch script of an attempt, a Node
row from sinfo's JSON, and the cluster config its spec accepts."""
import pytest

from apps.backends.slurm import check_config
from apps.backends.slurm.reconciler import node_inventory
from apps.backends.slurm.script import Attempt, Rank, batch_script, sbatch_argv


def _attempt(gpus: int = 1) -> Attempt:
    ranks = [Rank(replica=r, node=n, env={"RANK": str(r)}, command=["python", "train.py", "--lr", "0.1 0.2"],
                  log=f"/s/replica-{r}.log", exit_file=f"/s/replica-{r}.exit")
             for r, n in enumerate(["b1", "a1", "b1"])]
    return Attempt(job_name="cairn-7-2", partition="gpu", ranks=ranks, cpus=2, gpus=gpus, memory_mb=3000,
                   cwd="/s/work", batch_log="/s/batch.log", base_env={"PATH": "/usr/bin"})


def test_the_job_asks_for_the_placed_nodes_one_task_per_rank_in_rank_order():
    argv = sbatch_argv(_attempt(), script_path="/s/job.sh")
    assert argv[:8] == ["--job-name=cairn-7-2", "--partition=gpu", "--nodes=2", "--nodelist=b1,a1", "--ntasks=3",
                        "--distribution=arbitrary", "--cpus-per-task=2", "--gpus-per-task=1"]
    assert "--mem-per-cpu=1500" in argv and "--export=NONE" in argv and "--no-requeue" in argv
    assert argv[-1] == "/s/job.sh"
    assert not any(a.startswith("--gpus-per-task") for a in sbatch_argv(_attempt(gpus=0), script_path="/s/job.sh"))


def test_the_script_starts_one_step_per_rank_on_its_node_and_records_each_exit():
    script = batch_script(_attempt())
    steps = [line for line in script.splitlines() if "exec srun" in line]
    assert len(steps) == 3
    assert "--nodelist=b1" in steps[0] and "--nodelist=a1" in steps[1] and "--nodelist=b1" in steps[2]
    assert "export RANK=1;" in steps[1] and "--output=/s/replica-1.log" in steps[1]
    assert steps[0].endswith("-- python train.py --lr '0.1 0.2') &")  # quoted for the shell
    assert "trap true TERM" in script and "wait -n -p pid" in script


def test_a_node_row_from_sinfo():
    found = node_inventory({"name": "a1", "cpus": 64, "real_memory": 512000, "gres": "gpu:h100:8(S:0-1)",
                            "state": "mixed", "state_flags": []})
    assert (found["gpu_count"], found["gpu_model"], found["cpu_milli_allocatable"], found["schedulable"]) == (
        8, "h100", 64000, True)
    drained = node_inventory({"name": "a2", "cpus": 8, "real_memory": 1000, "gres": "gpu:2", "state": "idle",
                              "state_flags": ["DRAIN"]})
    assert (drained["gpu_count"], drained["gpu_model"], drained["schedulable"]) == (2, "", False)


def test_the_config_a_slurm_cluster_accepts():
    assert check_config({"slurm_conf": "/etc/slurm/slurm.conf", "partition": "cairn"})["partition"] == "cairn"
    for bad, words in [({}, "needs config.slurm_conf"), ({"slurm_conf": "slurm.conf"}, "absolute path"),
                       ({"slurm_conf": "/x", "queue": "q"}, "Unknown Slurm config key(s): queue"),
                       ({"slurm_conf": "/x", "partition": " "}, "partition name")]:
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            check_config(bad)
