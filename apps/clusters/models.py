from django.core.exceptions import ValidationError
from django.db import models

from apps.core.netguard import clean_allowed_hosts
from apps.projects.models import slug_validator

from .choices import AcceleratorType, Backend, CpuArch, CredentialKind, NodeHealth
from .networks import ProfileError, network_profile_clean
from .workdir import WorkingDirError, allowed_paths_clean


class Cluster(models.Model):
    name = models.CharField(max_length=40, unique=True, validators=[slug_validator])
    backend = models.CharField(max_length=16, choices=Backend.choices, default=Backend.LOCAL)
    # Backend-specific connection settings (never secrets: those are stored encrypted elsewhere).
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


# The scheduling policy's DEFAULT_LOCALITY_WAIT_SECONDS (which this layer may not import; a test
# checks they agree): chosen on the data replay of docs/benchmarks.md ("Datasets and the node cache").
DEFAULT_LOCALITY_WAIT_SECONDS = 20


class NetworkProfile(models.Model):
    """What a pool's training pods get to use a fast network (apps/clusters/networks.py): extra
    device resources (rdma/...), Multus networks, capabilities such as IPC_LOCK, a RuntimeClass,
    and the Pod Security level the project namespace must allow for it. Defined by an admin."""

    name = models.CharField(max_length=40, unique=True, validators=[slug_validator])
    description = models.CharField(max_length=200, blank=True)
    resources = models.JSONField(default=dict, blank=True,
                                 help_text='Per replica, e.g. {"rdma/hca_shared_devices_a": 1}.')
    networks = models.JSONField(default=list, blank=True,
                                help_text='Multus NetworkAttachmentDefinitions, e.g. ["ib-net"] or ["infra/roce@net1"].')
    capabilities = models.JSONField(default=list, blank=True, help_text="Of IPC_LOCK, SYS_RESOURCE, SYS_NICE.")
    runtime_class_name = models.CharField(max_length=253, blank=True)
    pod_security_level = models.CharField(
        max_length=16, default="restricted",
        choices=[("restricted", "restricted"), ("baseline", "baseline"), ("privileged", "privileged")],
        help_text="What the project namespace must allow for these pods (added capabilities need privileged).")
    env = models.JSONField(default=dict, blank=True, help_text='NCCL_*, UCX_* ..., e.g. {"NCCL_IB_HCA": "mlx5"}.')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            cleaned = network_profile_clean({f: getattr(self, f) for f in PROFILE_FIELDS})
        except ProfileError as exc:
            raise ValidationError(exc.errors) from exc
        for field, value in cleaned.items():
            setattr(self, field, value)


PROFILE_FIELDS = ("resources", "networks", "capabilities", "runtime_class_name", "pod_security_level", "env")


class ResourcePool(models.Model):
    """A set of nodes of one cluster that quotas are granted on."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="pools")
    name = models.CharField(max_length=40, unique=True, validators=[slug_validator])
    description = models.CharField(max_length=200, blank=True)
    accelerator_models = models.JSONField(default=list, blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    topology_keys = models.JSONField(default=list, blank=True)
    # What the pool is for, when an admin splits pools by vendor or CPU architecture: workloads
    # asking for another accelerator type or architecture are refused at submission. Empty: any
    # (the pool is mixed; each workload lands on nodes of its own type and architecture).
    accelerator_types = models.JSONField(default=list, blank=True,
                                         help_text="Accelerator types (nvidia, amd, ascend, none) the pool "
                                                   "offers; empty: any.")
    architectures = models.JSONField(default=list, blank=True,
                                     help_text="CPU architectures (amd64, arm64) of the pool; empty: any.")
    # Local clusters only: absolute directories (a shared dataset mount, say) that a workload of this
    # pool may name as its working_dir, besides its own folder (apps/clusters/workdir.py).
    allowed_paths = models.JSONField(
        default=list, blank=True,
        help_text="Absolute directories a workload on this pool may use as its working_dir, besides its own "
                  "folder (local clusters only). Empty: none.",
    )
    # Local clusters only: whether workloads of this pool may open connections to public
    # (non-private) addresses from their own network namespace. Loopback, private, link-local and
    # metadata addresses are never reachable from a workload, whatever this says.
    outbound_access = models.BooleanField(
        default=True,
        help_text="Workloads of this pool may reach public internet addresses (pip install, model "
                  "downloads). Loopback, private and link-local addresses are never reachable.",
    )
    # Hosts (names or IP addresses, optionally host:port) that URLs Cairn fetches for a user of this
    # pool (an S3 dataset's endpoint_url, say) may point at even when they resolve to a loopback,
    # private or link-local address: an S3 store on the cluster's own network.
    fetch_allowed_hosts = models.JSONField(
        default=list, blank=True,
        help_text="Hosts (name, IP, or host:port) that dataset endpoints and other URLs Cairn fetches may "
                  "use although they resolve to private or loopback addresses. Empty: none.",
    )
    # Kubernetes clusters: what its training pods get for a fast network (RDMA, Multus).
    network_profile = models.ForeignKey(NetworkProfile, on_delete=models.PROTECT, null=True, blank=True,
                                        related_name="pools",
                                        help_text="Training pods of this pool get the profile's network (Kubernetes).")
    # Kubernetes clusters: a replica no node takes for this long is requeued with reason
    # PendingTimeout, its quota released (empty: CAIRN_K8S_PENDING_TIMEOUT_SECONDS).
    pending_timeout_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Seconds a workload's pod may wait for a node before the workload is requeued (Kubernetes); "
                  "empty: the installation's default.")
    # Delay scheduling (apps/scheduling/policy/locality.py): how long a workload whose datasets some
    # node of the pool caches may wait for such a node when it would fit elsewhere now; 0: it starts at
    # once wherever it fits best (the cache is then only a tie-break among equal nodes).
    locality_wait_seconds = models.PositiveIntegerField(
        default=DEFAULT_LOCALITY_WAIT_SECONDS,
        help_text="Seconds a workload whose datasets a node of this pool caches may wait for such a node "
                  "(delay scheduling); 0: no waiting, it starts wherever it fits best.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            self.allowed_paths = allowed_paths_clean(self.allowed_paths)
        except WorkingDirError as exc:
            raise ValidationError({"allowed_paths": str(exc)}) from exc
        try:
            self.fetch_allowed_hosts = clean_allowed_hosts(self.fetch_allowed_hosts)
        except ValueError as exc:
            raise ValidationError({"fetch_allowed_hosts": str(exc)}) from exc
        for name, allowed in (("accelerator_types", AcceleratorType.values), ("architectures", CpuArch.values)):
            value = getattr(self, name)
            if not isinstance(value, list) or any(v not in allowed for v in value):
                raise ValidationError({name: f"A list of: {', '.join(allowed)}."})


class PoolQueue(models.Model):
    """A pool's queue as the scheduler last ordered it: the ids of the work that waits, in the order
    its last cycle considered them (a deployment's scale-up under its negated workload id). A queued
    workload's queue position is its place in `workloads`, from 1; a workload not in it (submitted
    since, or no longer waiting) has none.

    One row per pool, rewritten whole by the scheduler when the order changed: when work near the head
    of a long queue is admitted every entry behind it moves up one place, and one row per pool costs
    one write where a position on each workload's row cost a write per queued workload
    (docs/benchmarks.md, "Service cycle on PostgreSQL"). Read with
    apps.clusters.selectors.QueuePositions."""

    pool = models.OneToOneField(ResourcePool, on_delete=models.CASCADE, primary_key=True, related_name="queue")
    workloads = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"queue of {self.pool_id} ({len(self.workloads)} waiting)"


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    pool = models.ForeignKey(ResourcePool, on_delete=models.SET_NULL, null=True, blank=True, related_name="nodes")
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict, blank=True)
    cpu_milli_capacity = models.PositiveIntegerField(default=0)
    cpu_milli_allocatable = models.PositiveIntegerField(default=0)
    memory_mb_capacity = models.PositiveBigIntegerField(default=0)
    memory_mb_allocatable = models.PositiveBigIntegerField(default=0)
    # Accelerators: gpu_count devices of one vendor (accelerator_type; the gpu_* names predate
    # other vendors and count NPUs too) and one model.
    accelerator_type = models.CharField(max_length=16, choices=AcceleratorType.choices, default=AcceleratorType.NONE)
    cpu_arch = models.CharField(max_length=16, blank=True, help_text="kubernetes.io/arch: amd64, arm64 (blank: unknown)")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_memory_mb = models.PositiveIntegerField(default=0)
    topology_domain = models.CharField(max_length=100, blank=True)
    health = models.CharField(max_length=16, choices=NodeHealth.choices, default=NodeHealth.UNKNOWN)
    schedulable = models.BooleanField(default=True)
    # Why Cairn itself holds the node cordoned (a GPU fault, an admin). While set, the backend's
    # inventory sync cannot make the node schedulable again; node_uncordon clears it.
    cordon_reason = models.CharField(max_length=200, blank=True)
    # What pods Cairn does not own hold on the node (DaemonSets such as the device plugin, DCGM,
    # the CNI; other tenants' pods): their requests, which the scheduler takes off the allocatable
    # (Kubernetes clusters; the reconciler keeps them up to date).
    others_gpu_milli = models.PositiveIntegerField(default=0, help_text="Devices x 1000 held by pods not Cairn's.")
    others_cpu_milli = models.PositiveIntegerField(default=0, help_text="CPU requests of pods not Cairn's.")
    others_memory_mb = models.PositiveBigIntegerField(default=0, help_text="Memory requests of pods not Cairn's.")
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_name")]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"

    @property
    def gpu_milli_allocatable(self) -> int:
        return self.gpu_count * 1000

    def free_for_cairn(self) -> tuple[int, int, int]:
        """(GPU milli, CPU milli, memory MB) of the allocatable that pods not Cairn's leave."""
        return (max(0, self.gpu_milli_allocatable - self.others_gpu_milli),
                max(0, self.cpu_milli_allocatable - self.others_cpu_milli),
                max(0, self.memory_mb_allocatable - self.others_memory_mb))


class ClusterCredential(models.Model):
    """How Cairn reaches a Kubernetes cluster. The kubeconfig is stored encrypted (apps.clusters.crypto);
    in-cluster credentials are the service account of the Cairn pod and store nothing."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="credential")
    source = models.CharField(max_length=16, choices=CredentialKind.choices)
    encrypted_kubeconfig = models.TextField(blank=True, editable=False)
    context = models.CharField(max_length=253, blank=True)
    server = models.CharField(max_length=500, blank=True)  # for display; not a secret
    checked_at = models.DateTimeField(null=True, blank=True)
    check_ok = models.BooleanField(null=True, blank=True)
    check_detail = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.cluster} ({self.source})"
