from django.db import models


class Backend(models.TextChoices):
    LOCAL = "local", "Local processes"
    KUBERNETES = "kubernetes", "Kubernetes"


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
