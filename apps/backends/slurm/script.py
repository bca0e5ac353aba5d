"""Pure: the batch script and the sbatch arguments of one attempt, from plain data.

The job asks for the nodes Cairn placed the ranks on, one task per rank, in rank order
(--distribution=arbitrary with SLURM_HOSTFILE: rank r on the r-th line's node), each with its
CPUs and GPUs (GRES). The script starts one job step per rank with srun on that rank's node,
with the rank's environment, its own log and working directory, and records each step's exit
code in the rank's exit file (JSON: exit_code, finished_at) as soon as it ends (`wait -n`), so
the first failure of a gang is known while the others still run. The script itself ignores
SIGTERM: Cairn's stop signals the steps (scancel --signal=TERM), and the script outlives them to
write their exit codes.
"""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Rank:
    replica: int
    node: str
    env: dict[str, str]
    command: list[str]
    log: str
    exit_file: str


@dataclass(frozen=True)
class Attempt:
    job_name: str
    partition: str
    ranks: list[Rank]
    cpus: int  # per rank
    gpus: int  # per rank
    memory_mb: int  # per rank
    cwd: str
    batch_log: str
    base_env: dict[str, str]


def cpus_of(cpu_milli: int) -> int:
    return max(1, math.ceil(cpu_milli / 1000))


def gpus_of(gpu_milli: int) -> int:
    return math.ceil(gpu_milli / 1000) if gpu_milli > 0 else 0


def hostfile(attempt: Attempt) -> str:
    return "".join(f"{rank.node}\n" for rank in attempt.ranks)


def nodes_of(attempt: Attempt) -> list[str]:
    """The attempt's nodes, in the order their first rank comes."""
    return list(dict.fromkeys(rank.node for rank in attempt.ranks))


def sbatch_argv(attempt: Attempt, *, script_path: str) -> list[str]:
    nodes = nodes_of(attempt)
    argv = [
        f"--job-name={attempt.job_name}",
        *([f"--partition={attempt.partition}"] if attempt.partition else []),
        f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}",
        f"--ntasks={len(attempt.ranks)}", "--distribution=arbitrary",
        f"--cpus-per-task={attempt.cpus}",
        *([f"--gpus-per-task={attempt.gpus}"] if attempt.gpus else []),
        f"--mem-per-cpu={max(1, math.ceil(attempt.memory_mb / attempt.cpus))}",
        f"--output={attempt.batch_log}", f"--chdir={attempt.cwd}",
        "--export=NONE",  # nothing of Cairn's environment (it holds secrets): the script sets its own
        "--no-requeue",  # Cairn decides restarts, Slurm does not run an attempt twice
        script_path,
    ]
    return argv


def _exports(env: dict[str, str]) -> str:
    return " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(env.items()))


def batch_script(attempt: Attempt) -> str:
    lines = [
        "#!/bin/bash",
        f"# Cairn: {attempt.job_name}, one job step per rank (apps/backends/slurm/script.py)",
        f"export {_exports(attempt.base_env)}" if attempt.base_env else "",
        "trap true TERM  # Cairn signals the steps; this shell stays to record how they end",
        "declare -A rank_of exit_of",
    ]
    for rank in attempt.ranks:
        srun = [
            "srun", "--export=ALL", "--exact", "--nodes=1", "--ntasks=1", f"--nodelist={rank.node}",
            f"--cpus-per-task={attempt.cpus}", *([f"--gpus-per-task={attempt.gpus}"] if attempt.gpus else []),
            f"--job-name=rank-{rank.replica}", f"--output={rank.log}", "--open-mode=append",
            f"--chdir={attempt.cwd}", "--", *rank.command,
        ]
        lines.append(f"(export {_exports(rank.env)}; exec {shlex.join(srun)}) &")
        lines.append(f"rank_of[$!]={rank.replica}; exit_of[{rank.replica}]={shlex.quote(rank.exit_file)}")
    lines += [
        f"left={len(attempt.ranks)}",
        'while [ "$left" -gt 0 ]; do',
        '  pid=""; wait -n -p pid; rc=$?',
        '  [ -n "$pid" ] || continue  # woken by a signal, not by a step',
        '  file=${exit_of[${rank_of[$pid]}]}',
        '  printf \'{"exit_code": %d, "finished_at": %s}\\n\' "$rc" "$(date +%s.%N)" > "$file.tmp" && mv "$file.tmp" "$file"',
        "  left=$((left - 1))",
        "done",
        "",
    ]
    return "\n".join(line for line in lines if line is not None)
