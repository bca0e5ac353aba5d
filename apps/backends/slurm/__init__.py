"""The Slurm backend: Cairn's scheduler decides, Slurm runs what it decided (docs/slurm.md).

One Slurm job per attempt, submitted with the placement Cairn chose (the nodes, one task per rank
on its node, GPUs as GRES); inside it one job step per rank (srun), each with its own log and exit
file on the cluster's shared file system. Status comes from `squeue --json` (the job) and the
exit files (the ranks), nodes from `sinfo --json`. Slurm's own priorities are not used.

script.py      pure: the batch script and the sbatch arguments of an attempt
client.py      the Slurm commands (sbatch, squeue, scancel, sinfo, scontrol) for a cluster's config
backend.py     the Backend: launch (submit or adopt by job name), observe, signal, logs
reconciler.py  the pass: node inventory from sinfo, then the shared reconcile steps
"""
from pathlib import PurePosixPath

from apps.clusters.backends import BackendSpec

CONFIG_KEYS = {"slurm_conf", "partition", "shared_dir", "bin_dir"}


def check_config(config: dict) -> dict:
    """A Slurm cluster's config: `slurm_conf` (required: the slurm.conf the client commands read
    on this machine, a submit host), `partition` (Cairn's partition; default: the cluster's
    default one), `shared_dir` (a directory Cairn and every node see at the same path: scripts,
    logs, exit files, checkpoints; default: under CAIRN_DATA_DIR), `bin_dir` (where sbatch and
    the others are; default: PATH)."""
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise ValueError(f"Unknown Slurm config key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(CONFIG_KEYS))}).")
    if not isinstance(config.get("slurm_conf"), str) or not config["slurm_conf"]:
        raise ValueError("A Slurm cluster needs config.slurm_conf: the path of its slurm.conf on this machine.")
    for key in ("slurm_conf", "shared_dir", "bin_dir"):
        value = config.get(key)
        if value is not None and (not isinstance(value, str) or not PurePosixPath(value).is_absolute()):
            raise ValueError(f"config.{key} must be an absolute path.")
    if "partition" in config and (not isinstance(config["partition"], str) or not config["partition"].strip()):
        raise ValueError("config.partition must be a partition name.")
    return dict(config)


SPEC = BackendSpec(
    name="slurm", label="Slurm",
    check_config=check_config,
    node_telemetry="exporter",  # each node's DCGM exporter, by node name, as on Kubernetes
)
BACKEND = "apps.backends.slurm.backend.SlurmBackend"
RECONCILER = "apps.backends.slurm.reconciler.run_slurm_reconciler"
RECONCILE_ONCE = "apps.backends.slurm.reconciler.reconcile_once"
