"""Reads: volumes with their usage, quota, and what a workload's spec mounts."""
from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.db.models import Sum

from apps.projects.models import Project

from .models import DatasetVersion, NodeCacheEntry, StorageQuota, Volume
from .mounts import ARTIFACTS_VOLUME
from .paths import volume_path


def storage_quota_gb(*, project: Project) -> int:
    row = StorageQuota.objects.filter(project=project).first()
    return row.volume_gb if row else int(settings.CAIRN.get("VOLUME_QUOTA_GB", 100))


def volumes_declared_gb(*, project: Project) -> int:
    return Volume.objects.filter(project=project).aggregate(total=Sum("size_gb"))["total"] or 0


def folder_bytes(path: Path, *, limit_entries: int = 200_000) -> int:
    """Bytes in regular files under `path` (symlinks not followed); stops counting after
    `limit_entries` entries so that a huge folder cannot stall an API answer."""
    total, seen, stack = 0, 0, [str(path)]
    while stack and seen < limit_entries:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def volume_used_bytes(volume: Volume) -> int:
    """What the volume holds on this machine's folder (local backend)."""
    return folder_bytes(volume_path(volume.project_id, volume.name))


def volume_sizes_of(workload) -> dict[str, int]:
    """name -> declared GiB of the volumes a workload's spec mounts."""
    names = [v.get("name") for v in (workload.spec or {}).get("volumes") or [] if isinstance(v, dict)]
    if isinstance((workload.spec or {}).get("model"), dict):
        names.append(ARTIFACTS_VOLUME)
    if not names:
        return {}
    return dict(Volume.objects.filter(project_id=workload.project_id, name__in=names).values_list("name", "size_gb"))


def dataset_cache_view(*, workloads) -> dict[int, tuple[frozenset[str], int]]:
    """workload id -> (nodes whose cache holds every S3 dataset version it mounts, bytes of those
    versions that no node of its cluster holds yet): what data-aware placement and the pending
    reasons need. Workloads without S3 datasets are left out. Two queries."""
    wanted: dict[int, set[str]] = {}
    clusters: dict[int, int] = {}
    for w in workloads:
        digests = {d.get("digest") for d in (w.spec or {}).get("datasets") or []
                   if isinstance(d, dict) and d.get("source") == "s3" and d.get("digest")}
        if digests:
            wanted[w.pk], clusters[w.pk] = digests, w.pool.cluster_id
    if not wanted:
        return {}
    all_digests = set().union(*wanted.values())
    held: dict[tuple[int, str], set[str]] = {}
    for cluster_id, node, digest in NodeCacheEntry.objects.filter(version__digest__in=all_digests).values_list(
            "cluster_id", "node", "version__digest"):
        held.setdefault((cluster_id, digest), set()).add(node)
    sizes = dict(DatasetVersion.objects.filter(digest__in=all_digests).values_list("digest", "total_bytes"))
    out = {}
    for wid, digests in wanted.items():
        node_sets = [held.get((clusters[wid], d), set()) for d in digests]
        holders = frozenset(set.intersection(*node_sets)) if node_sets else frozenset()
        missing = sum(sizes.get(d, 0) for d, nodes in zip(digests, node_sets, strict=True) if not nodes)
        out[wid] = (holders, missing)
    return out
