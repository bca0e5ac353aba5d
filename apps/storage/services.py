"""Writes: volumes (step 1), datasets and their versions, node caches, models."""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from apps.accounts.models import User
from apps.clusters.crypto import CredentialsUnreadable, decrypt, encrypt
from apps.clusters.models import ResourcePool
from apps.clusters.workdir import WorkingDirError, check_working_dir
from apps.core.errors import ConflictError, ServiceError
from apps.core.netguard import Policy, UnsafeDestination
from apps.projects.models import Project
from apps.quotas.models import Quota

from . import cachefill
from .artifacts import ArchiveError, make_read_only, remove_tree, unpack
from .choices import SourceKind
from .models import Dataset, DatasetVersion, ModelVersion, NodeCacheEntry, RegisteredModel, Volume
from .mounts import (
    ARTIFACTS_VOLUME,
    MODEL_MOUNT,
    NAME_RE,
    MountError,
    check_clashes,
    check_mount_path,
    default_mount,
    parse_model_ref,
)
from .paths import model_version_relpath, volume_path
from .selectors import storage_quota_gb, volumes_declared_gb
from .sources import SourceError, host_path_drift, host_path_manifest, manifest_digest, s3_manifest

logger = logging.getLogger(__name__)

MAX_VOLUME_GB = 1024 * 1024

# Filled by apps above (workloads, at AppConfig.ready): each raises ConflictError when the volume
# may not be deleted now (an unfinished workload mounts it).
volume_delete_checks: list[Callable[[Volume], None]] = []
# The same for models: raise ConflictError while an unfinished workload serves the model.
model_delete_checks: list[Callable[[RegisteredModel], None]] = []


def _project_locked(project: Project) -> Project:
    return Project.objects.select_for_update().get(pk=project.pk)


def volume_create(
    *, project: Project, name: str, size_gb: int, description: str = "", created_by: User | None = None,
    quota_exempt: bool = False,
) -> Volume:
    """A new volume, if the project's volumes then still fit its storage quota (sum of sizes)."""
    if not NAME_RE.match(name or ""):
        raise ServiceError("Use 1-63 lowercase letters, digits and '-' for the volume name, starting and ending "
                           "with a letter or digit.")
    if not 1 <= size_gb <= MAX_VOLUME_GB:
        raise ServiceError(f"The size must be between 1 and {MAX_VOLUME_GB} GiB.")
    try:
        with transaction.atomic():
            _project_locked(project)  # one quota check at a time per project
            if not quota_exempt:
                quota, declared = storage_quota_gb(project=project), volumes_declared_gb(project=project)
                if declared + size_gb > quota:
                    raise ServiceError(
                        f"Project '{project.slug}' may declare {quota} GiB of volumes; {declared} GiB are declared, "
                        f"so {size_gb} GiB more do not fit. Delete a volume or ask an administrator for more.")
            volume = Volume.objects.create(project=project, name=name, size_gb=size_gb, description=description,
                                           created_by=created_by)
    except IntegrityError:
        raise ConflictError(f"A volume named '{name}' already exists in project '{project.slug}'.") from None
    volume_path(project.pk, name).mkdir(parents=True, exist_ok=True)
    return volume


def volume_delete(*, volume: Volume) -> None:
    """Delete the volume and its files (locally). Refused while a workload that mounts it is active."""
    if volume.name == ARTIFACTS_VOLUME and volume.project.registered_models.exists():
        raise ConflictError("The artifacts volume holds the project's registered models; delete the models first.")
    for check in volume_delete_checks:
        check(volume)
    path = volume_path(volume.project_id, volume.name)
    volume.delete()
    transaction.on_commit(lambda: shutil.rmtree(path, ignore_errors=True))


# -- what a workload's spec mounts ------------------------------------------------------------------

def storage_spec_check(*, project: Project, pool: ResourcePool, spec: dict) -> dict:
    """The spec with its `volumes`, `datasets` and `model` checked against the project (they
    exist, mount paths are allowed and do not clash) and resolved (dataset versions and model
    versions to numbers); ServiceError (400, 404 for what the project does not have) otherwise."""
    spec = _model_spec_check(project=project, spec=spec)
    spec = _dataset_spec_check(project=project, pool=pool, spec=spec)
    volumes = spec.get("volumes") or []
    known = {v.name: v for v in Volume.objects.filter(project=project, name__in=[m.get("name") for m in volumes])}
    resolved, paths = [], []
    for entry in volumes:
        name = entry.get("name")
        if name not in known:
            raise ServiceError(f"Volume '{name}' not found in project '{project.slug}'. Create it first "
                               "(cairn volume create).", status_code=404)
        read_only = bool(entry.get("read_only", False))
        if name == ARTIFACTS_VOLUME and not read_only:
            raise ServiceError("The artifacts volume holds registered models and mounts only read-only "
                               "(read_only: true).")
        try:
            mount = check_mount_path(entry.get("mount") or default_mount(name))
        except MountError as exc:
            raise ServiceError(f"Volume '{name}': {exc}") from None
        resolved.append({"name": name, "mount": mount, "read_only": read_only})
        paths.append((f"volume '{name}'", mount))
    paths += [(f"dataset '{d['name']}'", d["mount"]) for d in spec.get("datasets") or []]
    if isinstance(spec.get("model"), dict):
        paths.append((f"model '{spec['model']['name']}'", spec["model"]["mount"]))
    try:
        check_clashes(paths)
    except MountError as exc:
        raise ServiceError(str(exc)) from None
    if volumes:
        spec = {**spec, "volumes": resolved}
    return spec


def _dataset_spec_check(*, project: Project, pool: ResourcePool, spec: dict) -> dict:
    """`datasets: [{name, version, mount}]` -> each resolved to a version number, its digest and source."""
    wanted = spec.get("datasets") or []
    if not wanted:
        return spec
    datasets = {d.name: d for d in Dataset.objects.filter(project=project, name__in=[w.get("name") for w in wanted])}
    resolved = []
    for entry in wanted:
        name = entry.get("name")
        dataset = datasets.get(name)
        if dataset is None:
            raise ServiceError(f"Dataset '{name}' not found in project '{project.slug}' (cairn dataset ls).",
                               status_code=404)
        if dataset.source == SourceKind.HOST_PATH and dataset.pool_id != pool.pk:
            raise ServiceError(f"Dataset '{name}' is a host path of pool '{dataset.pool.name}'; workloads of pool "
                               f"'{pool.name}' cannot mount it.")
        number = entry.get("version")
        versions = dataset.versions.all()
        version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
        if version is None:
            raise ServiceError(f"Dataset '{name}' has no version {number} (cairn dataset show {name}).",
                               status_code=404)
        try:
            mount = check_mount_path(entry.get("mount") or f"/datasets/{name}")
        except MountError as exc:
            raise ServiceError(f"Dataset '{name}': {exc}") from None
        if dataset.source == SourceKind.HOST_PATH:
            drift = _host_path_version_drift(dataset, version)
            if drift:
                raise ConflictError(drift)
        resolved.append({"name": name, "version": version.number, "mount": mount, "digest": version.digest,
                         "source": dataset.source})
    return {**spec, "datasets": resolved}


def _host_path_version_drift(dataset: Dataset, version: DatasetVersion) -> str:
    """Why a host-path version can no longer be mounted ("" when it can). Cairn mounts the folder
    itself (no copy: it is already on the node), so a version is only what the folder holds
    while the folder still matches the version's manifest."""
    drift = host_path_drift(dataset.location["path"], version.manifest, recorded_at=version.created_at.timestamp())
    if not drift:
        return ""
    return (f"Dataset '{dataset.name}' version {version.number} no longer matches its folder "
            f"{dataset.location['path']}: {drift}. A host-path version is a record of the folder, which Cairn "
            f"mounts as it is: snapshot a new version (cairn dataset snapshot {dataset.name}) and use that, or put "
            "the folder back as it was.")


def dataset_versions_drift(*, workload) -> str:
    """Before a launch: why a host-path dataset version the workload mounts changed since it was
    recorded ("" when none did). The backends refuse to start it then, rather than mount other data."""
    wanted = {(d.get("name"), d.get("version")) for d in (workload.spec or {}).get("datasets") or []
              if isinstance(d, dict) and d.get("source") == SourceKind.HOST_PATH}
    if not wanted:
        return ""
    for version in DatasetVersion.objects.select_related("dataset").filter(
            dataset__project_id=workload.project_id, dataset__name__in={name for name, _ in wanted}):
        if (version.dataset.name, version.number) in wanted:
            drift = _host_path_version_drift(version.dataset, version)
            if drift:
                return drift
    return ""


def _model_spec_check(*, project: Project, spec: dict) -> dict:
    """`model: "name@3"` (or "name@latest") -> {"name", "version", "mount": "/model"}."""
    ref = spec.get("model")
    if not ref:
        return spec
    if isinstance(ref, dict):  # already resolved (a resubmitted spec)
        ref = f"{ref.get('name')}@{ref.get('version')}"
    try:
        name, number = parse_model_ref(ref)
    except MountError as exc:
        raise ServiceError(str(exc)) from None
    versions = ModelVersion.objects.filter(model__project=project, model__name=name)
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        what = f"Model '{name}'" + (f" has no version {number}" if number and versions.exists() else " not found")
        raise ServiceError(f"{what} in project '{project.slug}' (cairn model ls).", status_code=404)
    return {**spec, "model": {"name": name, "version": version.number, "mount": MODEL_MOUNT,
                              "run": version.run_id, "workload": version.workload_id}}


# -- models ----------------------------------------------------------------------------------------------

def artifacts_volume(*, project: Project) -> Volume:
    """The project's artifact store (created on first use, outside the storage quota)."""
    volume = Volume.objects.filter(project=project, name=ARTIFACTS_VOLUME).first()
    if volume is not None:
        return volume
    try:
        return volume_create(project=project, name=ARTIFACTS_VOLUME, size_gb=int(settings.CAIRN["ARTIFACTS_VOLUME_GB"]),
                             description="Registered models (written by Cairn only).", quota_exempt=True)
    except ConflictError:
        return Volume.objects.get(project=project, name=ARTIFACTS_VOLUME)


def model_version_register(
    *, project: Project, name: str, archive, run_id: int | None = None, workload_id: int | None = None,
    params: dict | None = None, metrics: dict | None = None,
) -> ModelVersion:
    """A new immutable version of model `name`: the archive unpacked into the artifact store
    (models/<name>/<n> of the `artifacts` volume), checksummed, read-only, with its lineage."""
    if not NAME_RE.match(name or ""):
        raise ServiceError("Give the model a name of 1-63 lowercase letters, digits and '-'.")
    volume = artifacts_volume(project=project)
    root = volume_path(project.pk, volume.name)
    try:
        staging, files, total = unpack(archive, into=root / "models", max_bytes=int(settings.CAIRN["MODEL_MAX_BYTES"]))
    except ArchiveError as exc:
        raise ServiceError(str(exc)) from None
    final: Path | None = None
    number = 0
    try:
        with transaction.atomic():
            model, _ = RegisteredModel.objects.get_or_create(project=project, name=name)
            model = RegisteredModel.objects.select_for_update().get(pk=model.pk)  # one number at a time
            number = (model.versions.aggregate(n=Max("number"))["n"] or 0) + 1
            final = root / model_version_relpath(name, number)
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():  # left by a registration whose transaction did not commit
                remove_tree(final)
            make_read_only(staging)
            os.replace(staging, final)
            version = ModelVersion.objects.create(
                model=model, number=number, run_id=run_id, workload_id=workload_id, params=params or {},
                metrics=metrics or {}, files=files, total_bytes=total)
    except BaseException:
        remove_tree(staging)
        if final is not None and not ModelVersion.objects.filter(model__project=project, model__name=name,
                                                                 number=number).exists():
            remove_tree(final)
        raise
    return version


def model_delete(*, model: RegisteredModel) -> None:
    """Delete a model with every version and its files. Refused while a workload serves it."""
    for check in model_delete_checks:
        check(model)
    path = volume_path(model.project_id, ARTIFACTS_VOLUME) / "models" / model.name
    model.delete()
    transaction.on_commit(lambda: remove_tree(path))


# -- datasets ---------------------------------------------------------------------------------------------

BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?$")

# The same as volume_delete_checks, for datasets.
dataset_delete_checks: list[Callable[[Dataset], None]] = []


def fetch_policy(*, project: Project, pool: ResourcePool | None) -> Policy:
    """The hosts a fetch for `project` may reach although private: the server-wide list, and the
    pool's when the project has a quota on it (a pool it may use)."""
    allowed = list(settings.CAIRN.get("FETCH_ALLOWED_HOSTS") or [])
    if pool is not None and pool.fetch_allowed_hosts:
        if Quota.objects.filter(project=project, pool=pool).exists():
            allowed += [h for h in pool.fetch_allowed_hosts if isinstance(h, str)]
    return Policy(allowed)


def _clean_location(*, source: str, location: dict, credentials: dict | None, pool: ResourcePool | None,
                    policy: Policy | None = None) -> dict:
    if not isinstance(location, dict):
        raise ServiceError("Give the location as an object.")
    if source == SourceKind.S3:
        bucket, prefix = location.get("bucket"), location.get("prefix") or ""
        endpoint, region = location.get("endpoint_url") or "", location.get("region") or ""
        if not isinstance(bucket, str) or not BUCKET_RE.match(bucket):
            raise ServiceError("An S3 dataset needs a bucket name (3-63 lowercase letters, digits, '.', '-').")
        if not isinstance(prefix, str) or len(prefix) > 1024 or ".." in prefix.split("/") or "\x00" in prefix:
            raise ServiceError("The prefix must be a key prefix without '..' (at most 1024 characters).")
        if endpoint and (not isinstance(endpoint, str) or not re.match(r"^https?://[^\s/]+(/[^\s]*)?$", endpoint)):
            raise ServiceError("endpoint_url must be an http(s) URL, e.g. https://s3.example.com.")
        if endpoint:
            try:  # a first check with a clear message; every connection is checked again (sources.py)
                (policy or Policy()).check_url(endpoint)
            except UnsafeDestination as exc:
                raise ServiceError(f"endpoint_url: {exc}") from None
        # Part of the host name without an endpoint_url (s3.<region>.amazonaws.com): letters, digits, '-'.
        if not isinstance(region, str) or not re.match(r"^[a-z0-9-]{0,40}$", region):
            raise ServiceError("region must be a short string such as 'us-east-1'.")
        creds = credentials or {}
        if not isinstance(creds, dict) or bool(creds.get("access_key_id")) != bool(creds.get("secret_access_key")):
            raise ServiceError("Give both access_key_id and secret_access_key, or neither (a public bucket).")
        return {"bucket": bucket, "prefix": prefix.strip("/"), "endpoint_url": endpoint, "region": region}
    if credentials:
        raise ServiceError("Only S3 datasets take credentials.")
    if source == SourceKind.NFS:
        server, path = location.get("server"), location.get("path")
        if not isinstance(server, str) or not HOST_RE.match(server):
            raise ServiceError("An NFS dataset needs the server's host name or address.")
        if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/") or len(path) > 1024:
            raise ServiceError("An NFS dataset needs the export's absolute path, without '..'.")
        return {"server": server, "path": path}
    if source == SourceKind.HOST_PATH:
        if pool is None:
            raise ServiceError("A host-path dataset names the pool whose allowed paths hold it ('pool').")
        try:
            path = check_working_dir(location.get("path") if isinstance(location.get("path"), str) else "",
                                     allowed_roots=pool.allowed_paths or [],
                                     denied_roots=[str(settings.CAIRN_DATA_DIR)])
        except WorkingDirError as exc:
            raise ServiceError(f"path: {exc}") from None
        if not path.startswith("/"):
            raise ServiceError("path: give the absolute path of a directory the pool allows.")
        return {"path": path}
    raise ServiceError(f"Unknown source '{source}': use s3, nfs or host_path.")


def dataset_credentials(dataset: Dataset) -> dict:
    if not dataset.credentials_encrypted:
        return {}
    try:
        return json.loads(decrypt(dataset.credentials_encrypted))
    except CredentialsUnreadable as exc:
        raise ServiceError(str(exc).replace("cluster", "dataset"), status_code=409) from None


def _read_manifest(*, source: str, location: dict, credentials: dict, policy: Policy | None = None) -> list[dict]:
    try:
        if source == SourceKind.S3:
            return s3_manifest(location, credentials, policy=policy)
        if source == SourceKind.HOST_PATH:
            return host_path_manifest(location["path"])
    except SourceError as exc:
        raise ServiceError(str(exc)) from None
    # NFS: Cairn does not mount exports itself; the version records the export (docs/data.md).
    return []


def dataset_register(
    *, project: Project, name: str, source: str, location: dict, credentials: dict | None = None,
    pool: ResourcePool | None = None, description: str = "", created_by: User | None = None,
) -> Dataset:
    """A new dataset and its version 1 (the manifest read now). The source is read before anything
    is stored: a source Cairn cannot read is refused (400) and nothing is kept."""
    if not NAME_RE.match(name or ""):
        raise ServiceError("Use 1-63 lowercase letters, digits and '-' for the dataset name.")
    policy = fetch_policy(project=project, pool=pool)
    location = _clean_location(source=source, location=location, credentials=credentials, pool=pool, policy=policy)
    creds = {k: credentials[k] for k in ("access_key_id", "secret_access_key")} if credentials else {}
    if Dataset.objects.filter(project=project, name=name).exists():
        raise ConflictError(f"A dataset named '{name}' already exists in project '{project.slug}'.")
    manifest = _read_manifest(source=source, location=location, credentials=creds, policy=policy)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                project=project, name=name, source=source, location=location, description=description,
                credentials_encrypted=encrypt(json.dumps(creds)) if creds else "", created_by=created_by,
                # s3: the pool whose fetch_allowed_hosts the snapshots keep using.
                pool=pool if source in (SourceKind.HOST_PATH, SourceKind.S3) else None)
            _version_create(dataset=dataset, number=1, manifest=manifest, created_by=created_by)
    except IntegrityError:
        raise ConflictError(f"A dataset named '{name}' already exists in project '{project.slug}'.") from None
    return dataset


def _version_create(*, dataset: Dataset, number: int, manifest: list[dict], created_by: User | None) -> DatasetVersion:
    return DatasetVersion.objects.create(
        dataset=dataset, number=number, manifest=manifest,
        digest=manifest_digest(dataset.source, dataset.location, manifest), files=len(manifest),
        total_bytes=sum(int(i["size"]) for i in manifest), created_by=created_by)


def dataset_snapshot(*, dataset: Dataset, created_by: User | None = None) -> tuple[DatasetVersion, bool]:
    """The source's current manifest as a new version; (the latest version, False) when nothing changed."""
    manifest = _read_manifest(source=dataset.source, location=dataset.location,
                              credentials=dataset_credentials(dataset),
                              policy=fetch_policy(project=dataset.project, pool=dataset.pool))
    digest = manifest_digest(dataset.source, dataset.location, manifest)
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        latest = locked.versions.order_by("-number").first()
        if latest is not None and latest.digest == digest and dataset.source != SourceKind.NFS:
            return latest, False
        number = (latest.number if latest else 0) + 1
        return _version_create(dataset=locked, number=number, manifest=manifest, created_by=created_by), True


def dataset_delete(*, dataset: Dataset) -> None:
    for check in dataset_delete_checks:
        check(dataset)
    dataset.delete()


# -- node caches ------------------------------------------------------------------------------------------

def node_cache_sync(*, cluster_id: int, node: str, root: Path) -> None:
    """Record which dataset versions the node's cache folder holds complete (cachefill.py writes
    them; local backend: this machine's folder), and forget those evicted."""
    _node_cache_set(cluster_id=cluster_id, node=node, present=cachefill.held(root) if root.is_dir() else {},
                    exact=True)


DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
CACHE_REPORT_MAX_ENTRIES = 500


def node_cache_report(*, cluster_id: int, node: str, report: str) -> bool:
    """A node's cache as its filler reported it (Kubernetes: the init container's termination
    message, cachefill.report): {"v": 1, "complete": bool, "held": {digest: bytes}, "evicted":
    [digest]}. A complete report replaces what Cairn knows of the node; a partial one adds what
    it holds and removes what it evicted. Anything malformed is ignored (False): it only steers
    placement, never what a pod mounts (every fill checks the cache itself)."""
    try:
        data = json.loads(report)
    except ValueError:
        return False
    if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(data.get("held"), dict):
        return False
    evicted = data.get("evicted") or []
    if not isinstance(evicted, list) or len(data["held"]) + len(evicted) > CACHE_REPORT_MAX_ENTRIES:
        return False
    present = {d: b for d, b in data["held"].items()
               if isinstance(d, str) and DIGEST_RE.match(d) and isinstance(b, int) and b >= 0}
    gone = [d for d in evicted if isinstance(d, str) and DIGEST_RE.match(d)]
    _node_cache_set(cluster_id=cluster_id, node=node, present=present, exact=data.get("complete") is True, gone=gone)
    return True


def node_cache_forget(*, cluster_id: int, nodes: list[str]) -> None:
    """Nodes that left the cluster take their caches with them."""
    NodeCacheEntry.objects.filter(cluster_id=cluster_id, node__in=nodes).delete()


def _node_cache_set(*, cluster_id: int, node: str, present: dict[str, int], exact: bool, gone=()) -> None:
    """Record `present` (digest -> bytes) as held by the node; `exact`: and nothing else."""
    versions = dict(DatasetVersion.objects.filter(digest__in=present).values_list("digest", "id"))
    with transaction.atomic():
        entries = NodeCacheEntry.objects.filter(cluster_id=cluster_id, node=node)
        if exact:
            entries.exclude(version_id__in=versions.values()).delete()
        elif gone:
            entries.filter(version__digest__in=gone).exclude(version_id__in=versions.values()).delete()
        known = set(entries.values_list("version_id", flat=True))
        NodeCacheEntry.objects.bulk_create([
            NodeCacheEntry(cluster_id=cluster_id, node=node, version_id=vid, bytes=present[digest])
            for digest, vid in versions.items() if vid not in known], ignore_conflicts=True)


def fill_store(dataset: Dataset) -> dict:
    """What cachefill.py needs to read an S3 dataset: its location, credentials, and the hosts its
    endpoint may resolve to although private (cachefill checks the endpoint again at fill time)."""
    return {**dataset.location, **dataset_credentials(dataset),
            "fetch_allowed_hosts": fetch_policy(project=dataset.project, pool=dataset.pool).allowed_hosts}


def datasets_of(workload) -> tuple[dict, ...]:
    """The spec's datasets with what a backend needs to mount them: location, and for S3 the
    manifest and the (decrypted) store settings for the cache fill."""
    wanted = [d for d in (workload.spec or {}).get("datasets") or [] if isinstance(d, dict)]
    if not wanted:
        return ()
    versions = {(v.dataset.name, v.number): v for v in DatasetVersion.objects.select_related("dataset").filter(
        dataset__project_id=workload.project_id, dataset__name__in=[w.get("name") for w in wanted])}
    out = []
    for entry in wanted:
        version = versions.get((entry.get("name"), entry.get("version")))
        if version is None:
            continue
        item = {**entry, "location": version.dataset.location}
        if version.dataset.source == SourceKind.S3:
            item.update(manifest=version.manifest, store=fill_store(version.dataset))
        out.append(item)
    return tuple(out)
