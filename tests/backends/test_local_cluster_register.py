"""This machine registers itself as the node of the local cluster."""
import platform
import socket

import psutil
import pytest

from apps.clusters.accelerators import normalise_arch
from apps.clusters.models import Cluster, Node, ResourcePool
from apps.clusters.services import local_cluster_register, local_gpu_inventory

pytestmark = pytest.mark.django_db


def test_registers_cluster_pool_and_this_node(settings):
    settings.CAIRN = {**settings.CAIRN, "LOCAL_CLUSTER_NAME": "here", "LOCAL_POOL_NAME": "here-pool"}
    node = local_cluster_register()

    cluster = Cluster.objects.get(name="here")
    assert cluster.backend == "local"
    assert ResourcePool.objects.get(name="here-pool").cluster == cluster
    assert node.cluster == cluster and node.pool.name == "here-pool"
    assert node.name == socket.gethostname()
    assert node.cpu_milli_capacity == psutil.cpu_count() * 1000 == node.cpu_milli_allocatable
    assert node.memory_mb_capacity == psutil.virtual_memory().total // (1024 * 1024)
    assert node.gpu_count == local_gpu_inventory().count  # 0 without an NVIDIA driver, no crash
    assert node.health == "healthy" and node.last_seen_at is not None
    assert node.cpu_arch == normalise_arch(platform.machine()) != ""
    assert node.accelerator_type == ("nvidia" if node.gpu_count else "none")


def test_registering_again_updates_capacity_and_keeps_admin_choices():
    first = local_cluster_register()
    Node.objects.filter(pk=first.pk).update(cpu_milli_capacity=1, schedulable=False, labels={"rack": "r1"})

    again = local_cluster_register()
    assert again.pk == first.pk
    assert Node.objects.count() == 1 and Cluster.objects.count() == 1
    again.refresh_from_db()
    assert again.cpu_milli_capacity == psutil.cpu_count() * 1000
    assert again.schedulable is False and again.labels == {"rack": "r1"}
    assert again.last_seen_at >= first.last_seen_at
