"""Project volumes, datasets with immutable versions, node caches, and versioned models."""
from django.conf import settings
from django.db import models

from apps.clusters.models import Cluster, ResourcePool
from apps.projects.models import Project

from .choices import SourceKind


class StorageQuota(models.Model):
    """How many GiB of volumes a project may declare (the sum of its volumes' sizes). Without a
    row the default of settings.CAIRN["VOLUME_QUOTA_GB"] applies."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="storage_quota")
    volume_gb = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.project}: {self.volume_gb} GiB"


class Volume(models.Model):
    """Named, persistent, shared storage of a project: a folder under Cairn's data directory
    (local backend) or a ReadWriteMany PersistentVolumeClaim (Kubernetes)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="volumes")
    name = models.CharField(max_length=63)
    size_gb = models.PositiveIntegerField(help_text="Declared size in GiB (the claim's request on Kubernetes).")
    description = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="volume_unique_name")]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


class Dataset(models.Model):
    """A registered data source; what workloads mount is one of its immutable versions."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=63)
    source = models.CharField(max_length=16, choices=SourceKind.choices)
    description = models.CharField(max_length=500, blank=True)
    # s3: endpoint_url, bucket, prefix, region; nfs: server, path; host_path: path.
    location = models.JSONField(default=dict)
    # s3 only: {"access_key_id", "secret_access_key"} as JSON, encrypted (apps.clusters.crypto).
    credentials_encrypted = models.TextField(blank=True)
    # host_path: the pool whose allowed_paths allow it (its workloads may mount it); s3: the pool
    # whose fetch_allowed_hosts its endpoint may use (apps/core/netguard.py).
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="dataset_unique_name")]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


class DatasetVersion(models.Model):
    """An immutable manifest of a dataset: every object's key, size and checksum (ETag or sha256)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    manifest = models.JSONField(default=list)  # [{"key", "size", "etag"}], sorted by key
    digest = models.CharField(max_length=64)  # sha256 of the manifest: the cache key
    files = models.PositiveIntegerField(default=0)
    total_bytes = models.PositiveBigIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset", "-number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique_number")]

    def __str__(self) -> str:
        return f"{self.dataset}@{self.number}"


class NodeCacheEntry(models.Model):
    """A dataset version held complete (checksums verified) in a node's cache."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=253)
    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="cache_entries")
    bytes = models.PositiveBigIntegerField(default=0)
    filled_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["node"]
        constraints = [models.UniqueConstraint(fields=["cluster", "node", "version"], name="cache_entry_unique")]


class RegisteredModel(models.Model):
    """A named model of a project; its versions are immutable copies of a run's output."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="registered_models")
    name = models.CharField(max_length=63)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="model_unique_name")]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


class ModelVersion(models.Model):
    """One registered version: files in the project's artifact store, with lineage (the run that
    produced it, its params and metric summaries at registration)."""

    model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    # Lineage. Runs belong to tracking (a layer above): kept by id, copied values for the rest.
    run_id = models.PositiveBigIntegerField(null=True, blank=True)
    workload_id = models.PositiveBigIntegerField(null=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    files = models.JSONField(default=list)  # [{"path", "size", "sha256"}]
    total_bytes = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "-number"]
        constraints = [models.UniqueConstraint(fields=["model", "number"], name="model_version_unique_number")]

    def __str__(self) -> str:
        return f"{self.model}@{self.number}"
