"""Multi-node rendezvous as a training pod runs it (issue 42, Found 5): the pod's command waits for
rank 0's DNS record before the launcher starts, and a bare `torchrun train.py` takes its options
from the PET_* variables Cairn sets. Run here as real processes: the container's command and env
exactly as the manifest builds them, with the pod's addresses made local."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from apps.backends.kubernetes import manifests as m
from apps.backends.kubernetes.manifests import ClusterOptions, WorkloadView, workload_manifests

TRAIN = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank())])
dist.all_reduce(total)
print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={int(total.item())} "
      f"node_rank={os.environ['GROUP_RANK']} local_rank={os.environ['LOCAL_RANK']}", flush=True)
dist.destroy_process_group()
"""


def container(**overrides) -> dict:
    fields = dict(id=7, kind="training", name="ddp", project="vision", attempt=1, replicas=2, gpu_milli=0,
                  cpu_milli=1000, memory_mb=1024, spec={"command": ["torchrun", "train.py"], "env": {}})
    fields.update(overrides)
    job = next(o for o in workload_manifests(WorkloadView(**fields), ClusterOptions()) if o["kind"] == "Job")
    return job["spec"]["template"]["spec"]["containers"][0]


def pod_env(main: dict, rank: int, **local) -> dict:
    """The container's env as the kubelet would give it (downward API: the completion index)."""
    env = {e["name"]: e["value"] for e in main["env"] if "value" in e}
    env.update({e["name"]: str(rank) for e in main["env"] if "valueFrom" in e})
    return {**os.environ, **env, **local}


def test_the_command_waits_for_rank_zeros_dns_record_then_runs(tmp_path):
    main = container(spec={"command": ["echo", "started"], "env": {}})
    assert main["command"][:2] == ["/bin/sh", "-c"] and main["command"][-2:] == ["echo", "started"]
    # a resolver that knows rank 0 only from its third question on (its pod got an address)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "getent").write_text('#!/bin/sh\nn=$(cat "$0.count" 2>/dev/null || echo 0); echo $((n+1)) > "$0.count"\n'
                                 '[ "$n" -ge 2 ]\n')
    (fake / "getent").chmod(0o755)
    env = pod_env(main, 1, PATH=f"{fake}:{os.environ['PATH']}")
    done = subprocess.run(main["command"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "started", done
    assert f"waiting for rank 0's DNS record ({env['MASTER_ADDR']})" in done.stderr
    assert (fake / "getent.count").read_text().strip() == "3"  # asked until it resolved


def test_a_name_that_never_resolves_is_waited_for_at_most_the_limit():
    main = container(spec={"command": ["echo", "started"], "env": {}})
    env = pod_env(main, 1, MASTER_ADDR="rank0.invalid", CAIRN_RENDEZVOUS_WAIT_SECONDS="1")
    started = time.monotonic()
    done = subprocess.run(main["command"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "started"
    assert "does not resolve after 1s; starting anyway" in done.stderr and time.monotonic() - started < 10


def test_a_single_replica_runs_its_command_as_it_is():
    assert container(replicas=1)["command"] == ["torchrun", "train.py"]


def test_nproc_per_node_from_gpus_or_the_spec():
    env = lambda main: {e["name"]: e.get("value") for e in main["env"]}  # noqa: E731
    assert env(container(gpu_milli=4000))["PET_NPROC_PER_NODE"] == env(container(gpu_milli=4000))["NPROC_PER_NODE"] == "4"
    assert env(container(gpu_milli=500))["PET_NPROC_PER_NODE"] == "1"
    explicit = container(gpu_milli=8000, spec={"command": ["torchrun", "t.py"], "env": {}, "nproc_per_node": 2})
    assert env(explicit)["PET_NPROC_PER_NODE"] == "2"


def test_a_bare_torchrun_of_two_ranks_rendezvouses_with_pet_variables_only(tmp_path):
    """Two "pods" (processes) run the container's command: the DNS wait, then `torchrun train.py`
    without a single option; torchrun reads --nnodes, --node-rank, --nproc-per-node,
    --master-addr and --master-port from PET_*. Rank 0's address is this machine."""
    (tmp_path / "train.py").write_text(TRAIN)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    main = container(spec={"command": [torchrun, "train.py"], "env": {}})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    local = {"MASTER_ADDR": "localhost", "PET_MASTER_ADDR": "localhost", "PET_MASTER_PORT": port,
             "OMP_NUM_THREADS": "1"}
    ranks = [subprocess.Popen(main["command"], cwd=tmp_path, env=pod_env(main, rank, **local), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for rank in (0, 1)]
    outputs = []
    try:
        for proc in ranks:
            outputs.append(proc.communicate(timeout=120)[0])
    finally:
        for proc in ranks:
            proc.kill()
    assert [p.returncode for p in ranks] == [0, 0], outputs
    lines = sorted(line for out in outputs for line in out.splitlines() if line.startswith("rank="))
    assert lines == ["rank=0 world=2 sum=1 node_rank=0 local_rank=0",
                     "rank=1 world=2 sum=1 node_rank=1 local_rank=0"], outputs
    assert {e["name"] for e in main["env"]} >= {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                                                "PET_NPROC_PER_NODE"}
    assert m.MASTER_PORT == 29500
