"""What a local replica mounts from apps/storage: project volumes (and, below, datasets and models).

In a bubblewrap sandbox each is bound at its mount path (read-only where the spec says so);
without bubblewrap nothing can be mounted, so replicas find each one through its environment
variable (CAIRN_VOLUME_<NAME>), which points at the mount path in a sandbox and at the host
folder otherwise (docs/data.md).
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from django.conf import settings

from apps.backends.base import LaunchError
from apps.storage import cachefill
from apps.storage.choices import SourceKind
from apps.storage.models import Dataset, DatasetVersion, Volume
from apps.storage.mounts import ARTIFACTS_VOLUME
from apps.storage.paths import cache_root, model_version_relpath, volume_path
from apps.storage.services import fill_store, node_cache_sync

from . import sandbox


def env_name(prefix: str, name: str) -> str:
    return f"{prefix}{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}"


def mounts(workload, iso: sandbox.Isolation) -> tuple[list[tuple[str, str, bool]], dict[str, str]]:
    """(source, mount point, read_only) binds and the env vars that name them."""
    spec = workload.spec or {}
    sandboxed = iso.level in (sandbox.BWRAP_ROOT, sandbox.BWRAP)
    binds: list[tuple[str, str, bool]] = []
    env: dict[str, str] = {}
    wanted = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
    existing = set(Volume.objects.filter(project_id=workload.project_id, name__in=[v.get("name") for v in wanted])
                   .values_list("name", flat=True))
    for entry in wanted:
        name = entry.get("name")
        if name not in existing:
            raise LaunchError(f"Volume '{name}' no longer exists in the project.")
        source = volume_path(workload.project_id, name)
        source.mkdir(parents=True, exist_ok=True)
        if iso.uid is not None:
            os.chown(source, iso.uid, iso.gid)  # the run user writes its project's volumes
        binds.append((str(source), entry["mount"], bool(entry.get("read_only"))))
        env[env_name("CAIRN_VOLUME_", name)] = entry["mount"] if sandboxed else str(source)
    model_binds, model_env = model_mount(workload, iso)
    data_binds, data_env = dataset_mounts(workload, iso)
    return binds + model_binds + data_binds, {**env, **model_env, **data_env}


def model_mount(workload, iso: sandbox.Isolation) -> tuple[list[tuple[str, str, bool]], dict[str, str]]:
    """The model a deployment serves: its version's folder in the artifact store, read-only at /model."""
    served = (workload.spec or {}).get("model")
    if not isinstance(served, dict):
        return [], {}
    source = volume_path(workload.project_id, ARTIFACTS_VOLUME) / model_version_relpath(served["name"],
                                                                                       int(served["version"]))
    if not source.is_dir():
        raise LaunchError(f"Model {served['name']}@{served['version']} is no longer in the artifact store.")
    sandboxed = iso.level in (sandbox.BWRAP_ROOT, sandbox.BWRAP)
    return [(str(source), served["mount"], True)], {"CAIRN_MODEL_DIR": served["mount"] if sandboxed else str(source)}


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def dataset_mounts(workload, iso: sandbox.Isolation) -> tuple[list[tuple[str, str, bool]], dict[str, str]]:
    """Datasets, read-only: S3 versions from the node cache (filled by `fill_prefix` before the
    replica starts), host paths bound as they are (still inside the pool's allowed paths)."""
    wanted = [d for d in (workload.spec or {}).get("datasets") or [] if isinstance(d, dict)]
    if not wanted:
        return [], {}
    sandboxed = iso.level in (sandbox.BWRAP_ROOT, sandbox.BWRAP)
    datasets = {d.name: d for d in Dataset.objects.filter(project_id=workload.project_id,
                                                          name__in=[w.get("name") for w in wanted])}
    binds, env = [], {}
    for entry in wanted:
        dataset = datasets.get(entry.get("name"))
        if dataset is None:
            raise LaunchError(f"Dataset '{entry.get('name')}' no longer exists in the project.")
        if dataset.source == SourceKind.S3:
            source = str(cache_root() / entry["digest"] / cachefill.DATA)
        elif dataset.source == SourceKind.HOST_PATH:
            source = os.path.realpath(dataset.location["path"])
            roots = [os.path.realpath(r) for r in workload.pool.allowed_paths or []]
            if not any(_inside(source, r) for r in roots) or not os.path.isdir(source):
                raise LaunchError(f"Dataset '{dataset.name}': {dataset.location['path']} is no longer a directory "
                                  "inside the pool's allowed paths.")
        else:
            raise LaunchError(f"Dataset '{dataset.name}' is an NFS export: the local backend does not mount NFS; "
                              "mount the export on this machine and register it as a host-path dataset.")
        binds.append((source, entry["mount"], True))
        env[env_name("CAIRN_DATASET_", dataset.name)] = entry["mount"] if sandboxed else source
    return binds, env


def fill_prefix(workload, *, directory: Path, replica: int) -> list[str]:
    """The command that fills the node cache with the workload's S3 dataset versions and then
    execs the replica (apps/storage/cachefill.py); [] when it mounts none."""
    wanted = [d for d in (workload.spec or {}).get("datasets") or [] if isinstance(d, dict)]
    if not wanted:
        return []
    versions = {(v.dataset.name, v.number): v for v in DatasetVersion.objects.select_related("dataset").filter(
        dataset__project_id=workload.project_id, dataset__source=SourceKind.S3,
        dataset__name__in=[w.get("name") for w in wanted])}
    entries = []
    for entry in wanted:
        version = versions.get((entry.get("name"), entry.get("version")))
        if version is None:
            continue
        entries.append({"name": f"{version.dataset.name}@{version.number}", "digest": version.digest,
                        "manifest": version.manifest,
                        "store": fill_store(version.dataset)})  # with the hosts it may reach
    if not entries:
        return []
    for node in {p.get("node") for p in workload.placement or [] if isinstance(p, dict) and p.get("node")}:
        node_cache_sync(cluster_id=workload.pool.cluster_id, node=node, root=cache_root())
    job = directory / f"cache-fill-{replica}.json"
    fd = os.open(job, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # credentials: Cairn's alone
    with os.fdopen(fd, "w") as f:
        json.dump({"cache_root": str(cache_root()), "entries": entries,
                   "max_bytes": int(float(settings.CAIRN["DATASET_CACHE_GB"]) * 1024**3)}, f)
    return [sys.executable, cachefill.__file__, str(job), "--"]
