"""The Slurm backend: an attempt is one Slurm job, a rank one job step (script.py).

Like every backend it never writes workload status (apps.backends.services and the reconciler
do). Files live under the cluster's shared directory, seen at the same path by Cairn and every
node (a real cluster's shared file system; in the tests, one machine):

    <shared>/workloads/<id>/work/                          default working directory
    <shared>/workloads/<id>/checkpoints/                   CAIRN_CHECKPOINT_DIR (kept across attempts)
    <shared>/workloads/<id>/attempt-<n>/job.sh, job.json   the batch script, the submitted job's id
    <shared>/workloads/<id>/attempt-<n>/replica-<r>.log    the rank's output (srun --output)
    <shared>/workloads/<id>/attempt-<n>/replica-<r>.exit   the rank's exit code, written by job.sh
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from apps.backends import replica_env as env_lib
from apps.backends.base import EXITED, LOST, RUNNING, Backend, LaunchError, ReplicaState
from apps.backends.logfiles import FileLogReader, read_log
from apps.workloads.kinds import kind_spec

from . import SPEC
from .client import LIVE_STATES, SlurmClient
from .script import Attempt, Rank, batch_script, cpus_of, gpus_of, sbatch_argv

if TYPE_CHECKING:
    from apps.workloads.models import Workload


def shared_dir(cluster) -> Path:
    configured = (cluster.config or {}).get("shared_dir")
    return Path(configured) if configured else Path(settings.CAIRN_DATA_DIR) / "slurm" / cluster.name


def workload_dir(workload: Workload) -> Path:
    return shared_dir(workload.pool.cluster) / "workloads" / str(workload.pk)


def attempt_dir(workload: Workload, attempt: int) -> Path:
    return workload_dir(workload) / f"attempt-{attempt}"


def job_name(workload: Workload, attempt: int) -> str:
    return f"cairn-{workload.pk}-{attempt}"


def master_port(workload_id: int, attempt: int) -> int:
    """The same for every launch of one attempt (a resumed launch joins the ranks that run)."""
    digest = hashlib.sha256(f"{workload_id}/{attempt}".encode()).digest()
    return 29500 + int.from_bytes(digest[:4], "big") % 10000


class SlurmBackend(Backend):
    name = SPEC.name

    def client(self, workload: Workload) -> SlurmClient:
        return SlurmClient(workload.pool.cluster.config or {})

    # -- launch ----------------------------------------------------------------------------------

    def launch(self, workload: Workload, *, attempt: int, run_env: dict[str, str] | None = None) -> dict:
        """Submit the attempt's job, or adopt it: an earlier launch of this attempt that was
        interrupted may have submitted it already (its job.json, or a job of its name whose
        output is this attempt's batch log)."""
        client = self.client(workload)
        directory = attempt_dir(workload, attempt)
        plan = self._attempt(workload, attempt, client=client, run_env=run_env)
        job = self._submitted(workload, attempt, client=client, batch_log=plan.batch_log)
        if job is None:
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o700)  # the script holds the run token
            for path in (Path(plan.cwd), workload_dir(workload) / "checkpoints"):
                path.mkdir(parents=True, exist_ok=True)
            script = directory / "job.sh"
            script.write_text(batch_script(plan))
            script.chmod(0o700)
            hosts = directory / "hostfile"
            hosts.write_text("".join(f"{rank.node}\n" for rank in plan.ranks))
            job = client.submit(sbatch_argv(plan, script_path=str(script)), script=str(script),
                                env={"SLURM_HOSTFILE": str(hosts)})
            (directory / "job.json").write_text(json.dumps({"job": job}))
        return {"backend": self.name, "attempt": attempt, "job": job, "job_name": plan.job_name,
                "replicas": [{"replica": rank.replica, "node": rank.node} for rank in plan.ranks], "alive": True}

    def _submitted(self, workload: Workload, attempt: int, *, client: SlurmClient, batch_log: str) -> str | None:
        try:
            return str(json.loads((attempt_dir(workload, attempt) / "job.json").read_text())["job"])
        except (OSError, ValueError, KeyError):
            pass
        for job in client.jobs(name=job_name(workload, attempt)):
            if job.get("standard_output") == batch_log:
                return str(job["job_id"])
        return None

    def started(self, workload: Workload, *, attempt: int) -> list[dict]:
        directory = attempt_dir(workload, attempt)
        if not (directory / "job.json").exists():
            return []
        return [{"replica": r} for r in range(workload.replicas)]

    def _attempt(self, workload: Workload, attempt: int, *, client: SlurmClient,
                 run_env: dict[str, str] | None) -> Attempt:
        kind = kind_spec(workload.kind)
        if kind.serves_port or kind.local_command is not None:
            raise LaunchError(f"The Slurm backend runs jobs that run to completion; a {workload.kind} needs a "
                              "backend that serves it (local or Kubernetes).")
        spec = workload.spec or {}
        command = spec.get("command")
        if isinstance(command, str) and command.strip():
            command = ["/bin/sh", "-c", command]
        if not command or not isinstance(command, list):
            raise LaunchError(f"The {workload.kind} spec has no command to run.")
        placement = {e.get("replica"): e for e in workload.placement or [] if isinstance(e, dict)}
        nodes = [str((placement.get(r) or {}).get("node") or "") for r in range(workload.replicas)]
        if not all(nodes):
            raise LaunchError("The workload has no placement for every replica.")
        addresses = {n.get("name"): n.get("address") or n.get("hostname") or n.get("name") for n in client.nodes()}
        directory = attempt_dir(workload, attempt)
        working = spec.get("working_dir")
        cwd = str(working) if isinstance(working, str) and working.startswith("/") else str(
            workload_dir(workload) / "work" / (working or ""))
        order = list(dict.fromkeys(nodes))
        base = {**env_lib.inherited_env(), "SLURM_CONF": client.config["slurm_conf"],
                "HOME": env_lib.inherited_env().get("HOME", cwd)}
        ranks = []
        for replica, node in enumerate(nodes):
            on_node = [r for r, n in enumerate(nodes) if n == node]
            reserved = env_lib.reserved_env(
                workload_id=workload.pk, workload_name=workload.name, kind=workload.kind,
                project=workload.project.slug, api_url=settings.CAIRN["PUBLIC_URL"], attempt=attempt,
                replica=replica, replicas=workload.replicas, master_port=master_port(workload.pk, attempt), gpus=[])
            for key in env_lib.DEVICE_VISIBILITY_KEYS:
                reserved.pop(key)  # Slurm sets them for the GRES it binds
            reserved.update(MASTER_ADDR=str(addresses.get(nodes[0]) or nodes[0]), LOCAL_RANK=str(on_node.index(replica)),
                            LOCAL_WORLD_SIZE=str(len(on_node)), NODE_RANK=str(order.index(node)), CAIRN_NODE=node)
            reserved.update(run_env or {})
            reserved.update(self.checkpoint_env(workload) if kind.runs_to_completion else {})
            env, _ = env_lib.replica_env(base={}, user=spec.get("env"), reserved=reserved)
            ranks.append(Rank(replica=replica, node=node, env=env, command=env_lib.expand_command(command, {**base, **env}),
                              log=str(directory / f"replica-{replica}.log"),
                              exit_file=str(directory / f"replica-{replica}.exit")))
        return Attempt(job_name=job_name(workload, attempt), partition=client.config.get("partition", ""), ranks=ranks,
                       cpus=cpus_of(workload.cpu_milli), gpus=gpus_of(workload.gpu_milli),
                       memory_mb=workload.memory_mb, cwd=cwd, batch_log=str(directory / "batch.log"), base_env=base)

    def checkpoint_env(self, workload: Workload) -> dict[str, str]:
        return {"CAIRN_CHECKPOINT_DIR": str(workload_dir(workload) / "checkpoints")}

    # -- observe and signal ----------------------------------------------------------------------

    def _job(self, workload: Workload) -> dict | None:
        runtime = workload.runtime or {}
        attempt = int(runtime.get("attempt") or workload.attempt)
        client = self.client(workload)
        job = runtime.get("job")
        if not job:
            job = self._submitted(workload, attempt, client=client,
                                  batch_log=str(attempt_dir(workload, attempt) / "batch.log"))
        if not job:
            return None
        found = client.jobs(ids=[str(job)])
        return found[0] if found else {"job_id": job, "job_state": "GONE"}

    def observe(self, workload: Workload) -> list[ReplicaState]:
        runtime = workload.runtime or {}
        attempt = runtime.get("attempt")
        if attempt is None or not runtime.get("replicas"):
            return []
        job = self._job(workload)
        job_alive = job is not None and job.get("job_state") in LIVE_STATES
        states = []
        for record in runtime["replicas"]:
            replica = int(record["replica"])
            try:
                result = json.loads((attempt_dir(workload, int(attempt)) / f"replica-{replica}.exit").read_text())
            except (OSError, ValueError):
                result = None
            if result is not None:
                code = int(result.get("exit_code", 1))
                states.append(ReplicaState(replica=replica, phase=EXITED, exit_code=code,
                                           signal=code - 128 if code > 128 else None,
                                           finished_at=result.get("finished_at")))
            elif job_alive:
                states.append(ReplicaState(replica=replica, phase=RUNNING))
            else:
                state = (job or {}).get("job_state", "unknown")
                states.append(ReplicaState(replica=replica, phase=LOST, detail=f"Slurm job {state.lower()}"))
        return states

    def signal(self, workload: Workload, *, force: bool = False) -> int:
        """SIGTERM to every step (the ranks), or SIGKILL (force); a job not started yet is
        cancelled. Returns how many ranks were alive."""
        job = self._job(workload)
        if job is None or job.get("job_state") not in LIVE_STATES:
            return 0
        client = self.client(workload)
        alive = sum(1 for state in self.observe(workload) if state.alive)
        if job.get("job_state") == "PENDING":
            client.cancel(str(job["job_id"]))
        else:
            client.cancel(str(job["job_id"]), signal="KILL" if force else "TERM")
        return alive

    # -- logs ------------------------------------------------------------------------------------

    def log_path(self, workload: Workload, *, replica: int, attempt: int) -> Path:
        return attempt_dir(workload, attempt) / f"replica-{replica}.log"

    def logs(self, workload: Workload, *, replica: int, attempt: int, tail: int | None = None) -> str:
        return read_log(self.log_path(workload, replica=replica, attempt=attempt), tail=tail)

    def last_output_at(self, workload: Workload, *, replica: int, attempt: int) -> float | None:
        try:
            return self.log_path(workload, replica=replica, attempt=attempt).stat().st_mtime
        except OSError:
            return None

    def log_reader(self, workload: Workload, *, replica: int, attempt: int, tail: int | None) -> FileLogReader:
        base = workload_dir(workload)
        return FileLogReader(workload_id=workload.pk, replica=replica, attempt=attempt, tail_lines=tail,
                             path=lambda n: base / f"attempt-{n}" / f"replica-{replica}.log")
