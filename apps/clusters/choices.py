from django.db import models


class Backend(models.TextChoices):
    LOCAL = "local", "Local processes"
    KUBERNETES = "kubernetes", "Kubernetes"
    SLURM = "slurm", "Slurm"


class NodeHealth(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    UNHEALTHY = "unhealthy", "Unhealthy"
    UNKNOWN = "unknown", "Unknown"


class CredentialKind(models.TextChoices):
    KUBECONFIG = "kubeconfig", "Kubeconfig"
    IN_CLUSTER = "in_cluster", "In-cluster service account"


# Node label Cairn sets on local nodes: how replicas launched there are isolated
# (apps/backends/local/sandbox.py levels; docs/local-backend.md#isolation).
ISOLATION_LABEL = "cairn.dev/replica-isolation"
# Local nodes: "own" when every workload gets a network namespace of its own, "host" when they share the host's.
NETWORK_LABEL = "cairn.dev/replica-network"


class AcceleratorType(models.TextChoices):
    """The vendor family of a node's accelerators (apps/clusters/accelerators.py has each one's
    Kubernetes resource names and node labels)."""

    NONE = "none", "None"
    NVIDIA = "nvidia", "NVIDIA"
    AMD = "amd", "AMD"
    ASCEND = "ascend", "Ascend"


class CpuArch(models.TextChoices):
    """CPU architectures, by their Kubernetes names (the `kubernetes.io/arch` node label)."""

    AMD64 = "amd64", "amd64 (x86-64)"
    ARM64 = "arm64", "arm64 (AArch64)"
