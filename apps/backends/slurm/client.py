"""The Slurm client commands for one cluster: its slurm.conf through SLURM_CONF, nothing of
Cairn's own environment (it holds secrets), JSON where Slurm offers it (22.05: squeue and sinfo
--json; no sacct without slurmdbd, so ranks report their exit codes in files)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

from apps.backends.base import LaunchError, TransientBackendError

TIMEOUT = 30.0
# squeue's states of a job that still holds or will hold its nodes
LIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
               "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD"}


class SlurmClient:
    def __init__(self, config: dict):
        self.config = config

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", os.defpath), "SLURM_CONF": self.config["slurm_conf"],
                "LANG": "C.UTF-8"}

    def program(self, name: str) -> str:
        if self.config.get("bin_dir"):
            return os.path.join(self.config["bin_dir"], name)
        return shutil.which(name) or name

    def run(self, *argv: str, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([self.program(argv[0]), *argv[1:]], input=input, capture_output=True, text=True,
                                  timeout=TIMEOUT, env={**self.env(), **(env or {})})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TransientBackendError(f"{argv[0]}: {exc}") from exc

    def json(self, *argv: str) -> dict:
        done = self.run(*argv, "--json")
        if done.returncode != 0:
            raise TransientBackendError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
        try:
            return json.loads(done.stdout)
        except ValueError as exc:
            raise TransientBackendError(f"{argv[0]} --json: not JSON ({exc})") from exc

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, argv: list[str], *, script: str, env: dict[str, str]) -> str:
        """sbatch; returns the job id. A refusal (bad node name, no such partition) is a LaunchError."""
        done = self.run("sbatch", "--parsable", *argv, env=env)
        if done.returncode != 0:
            raise LaunchError(f"sbatch refused the job: {done.stderr.strip()}")
        return done.stdout.strip().split(";")[0]

    def jobs(self, *, name: str | None = None, ids: list[str] | None = None) -> list[dict]:
        """Jobs slurmctld still knows (finished ones for MinJobAge), by name or id. Filtered here:
        22.05's `squeue --json` answers every job whatever --jobs or --name say."""
        found = self.json("squeue").get("jobs") or []
        return [job for job in found if (name is None or job.get("name") == name)
                and (ids is None or str(job.get("job_id")) in ids)]

    def cancel(self, job: str, *, signal: str | None = None) -> bool:
        argv = ["scancel", *([f"--signal={signal}"] if signal else []), job]
        return self.run(*argv).returncode == 0

    def nodes(self) -> list[dict]:
        return self.json("sinfo").get("nodes") or []

    def ping(self) -> dict:
        done = self.run("scontrol", "ping")
        up = done.returncode == 0 and "is UP" in done.stdout
        return {"ok": up, "version": "", "detail": (done.stdout or done.stderr).strip()}
