"""The test Slurm itself: several nodes on one host, GPUs as GRES, one step per rank."""
import json
import time

from .testbed import DEFAULT_NODES


def test_every_node_is_up_with_its_gpus(slurm):
    nodes = {n["name"]: n for n in json.loads(slurm.run("sinfo", "--json").stdout)["nodes"]}
    assert sorted(nodes) == sorted(node.name for node in DEFAULT_NODES)
    assert nodes["sn1"]["gres"] == "gpu:h100:2" and nodes["sn1"]["cpus"] == 8
    assert {n["state"] for n in nodes.values()} == {"idle"}


def test_a_job_runs_one_step_per_rank_on_the_nodes_it_names(slurm, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"for r in 0 1; do srun --exact -N1 -n1 --nodelist=sn$((r+1)) --gres=gpu:1 --output={tmp_path}/rank-$r.log "
        "bash -c 'echo node=$SLURMD_NODENAME gpus=${CUDA_VISIBLE_DEVICES-none}' & done; wait\n")
    job = slurm.run("sbatch", "--parsable", "-N2", "-n2", "--nodelist=sn1,sn2", "--gres=gpu:1",
                    f"--output={tmp_path}/batch.log", str(script)).stdout.strip()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        # (22.05's squeue --json lists every job whatever --jobs says)
        [found] = [j for j in json.loads(slurm.run("squeue", "--json").stdout)["jobs"] if str(j["job_id"]) == job]
        if found["job_state"] not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            break
        time.sleep(0.2)
    assert found["job_state"] == "COMPLETED", slurm.tails()
    gpus = "0" if slurm.device_files else "none"
    assert (tmp_path / "rank-0.log").read_text().strip() == f"node=sn1 gpus={gpus}"
    assert (tmp_path / "rank-1.log").read_text().strip() == f"node=sn2 gpus={gpus}"
