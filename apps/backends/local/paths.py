"""Where the local backend keeps a workload's files, under settings.CAIRN_DATA_DIR.

    workloads/<id>/work/                        default working directory (kept across restarts)
    workloads/<id>/home/                        the replicas' HOME (kept across restarts)
    workloads/<id>/checkpoints/                 CAIRN_CHECKPOINT_DIR of training jobs (kept across restarts)
    workloads/<id>/attempt-<n>/replica-<r>.log  stdout + stderr of replica r in attempt n
    workloads/<id>/attempt-<n>/replica-<r>.json launch record: pid and process start time
    workloads/<id>/attempt-<n>/replica-<r>.exit written by the shim when the replica exits
"""
from pathlib import Path

from django.conf import settings


def workload_dir(workload_id: int) -> Path:
    return Path(settings.CAIRN_DATA_DIR) / "workloads" / str(workload_id)


def attempt_dir(workload_id: int, attempt: int) -> Path:
    return workload_dir(workload_id) / f"attempt-{attempt}"


def work_dir(workload_id: int) -> Path:
    return workload_dir(workload_id) / "work"


def checkpoint_dir(workload_id: int) -> Path:
    return workload_dir(workload_id) / "checkpoints"


def home_dir(workload_id: int) -> Path:
    return workload_dir(workload_id) / "home"


def replica_log_path(workload_id: int, attempt: int, replica: int) -> Path:
    return attempt_dir(workload_id, attempt) / f"replica-{replica}.log"


def replica_record_path(workload_id: int, attempt: int, replica: int) -> Path:
    return attempt_dir(workload_id, attempt) / f"replica-{replica}.json"


def replica_exit_path(workload_id: int, attempt: int, replica: int) -> Path:
    return attempt_dir(workload_id, attempt) / f"replica-{replica}.exit"
