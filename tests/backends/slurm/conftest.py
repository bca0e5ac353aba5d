"""Fixtures for the Slurm backend: a real Slurm (munged, slurmctld, one slurmd per node) started
once per test session (per xdist worker) from testbed.py, in a temporary directory."""
import os

import pytest

from .testbed import PARTITION, SlurmCluster, SlurmError, missing_programs


@pytest.fixture(scope="session")
def real_slurm(tmp_path_factory):
    missing = missing_programs()
    if missing:  # a failure, never a skip: a skip would hide that these tests did not run
        pytest.fail(f"Slurm is not installed ({', '.join(missing)} missing): run make slurm", pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("The Slurm tests start slurmd, which runs as root: run them as root (make test does).",
                    pytrace=False)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmError as exc:
        cluster.stop()
        pytest.fail(str(exc), pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm(real_slurm):
    """The session's Slurm, with no job left running by the test before."""
    yield real_slurm
    real_slurm.cancel_all()


@pytest.fixture
def slurm_cluster(db, slurm, tmp_path):
    """A Slurm cluster registered in Cairn (the API's way: cluster_register) on the session's
    Slurm, with one pool; its Node rows synced from sinfo."""
    from apps.backends.slurm.client import SlurmClient
    from apps.backends.slurm.reconciler import sync_nodes
    from apps.clusters.services import cluster_register
    from tests.factories import PoolFactory

    shared = tmp_path / "slurm-shared"
    shared.mkdir()
    cluster = cluster_register(name="hpc", backend="slurm", config={
        "slurm_conf": str(slurm.conf), "partition": PARTITION, "shared_dir": str(shared)})
    PoolFactory(cluster=cluster, name="hpc-gpu")
    sync_nodes(cluster, SlurmClient(cluster.config))
    return cluster


@pytest.fixture
def slurm_pool(slurm_cluster):
    return slurm_cluster.pools.get()


@pytest.fixture(autouse=True)
def _fast_stop(settings):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 3.0, "RESTART_BACKOFF_SECONDS": 0.2}


def on_slurm(pool, *, nodes=("sn1",), gpu_milli=0, **fields):
    """A workload the scheduler has just admitted on the Slurm pool: replica r on nodes[r]."""
    from django.utils import timezone

    from tests.factories import WorkloadFactory

    return WorkloadFactory(status="admitted", pool=pool, replicas=len(nodes), gpu_milli=gpu_milli,
                           admitted_at=timezone.now(),
                           placement=[{"replica": r, "node": n, "gpus": list(range(gpu_milli // 1000))}
                                      for r, n in enumerate(nodes)], **fields)


def reconcile_slurm_until(workload, statuses, *, timeout: float = 30.0, condition=None):
    """Slurm reconciler passes until the workload is in one of `statuses` (and `condition(w)`)."""
    import time

    from apps.backends.slurm.reconciler import reconcile_once

    statuses = {statuses} if isinstance(statuses, str) else set(statuses)
    deadline = time.monotonic() + timeout
    while True:
        reconcile_once()
        workload.refresh_from_db()
        if workload.status in statuses and (condition is None or condition(workload)):
            return workload
        if time.monotonic() > deadline:
            raise AssertionError(
                f"workload {workload.pk} is {workload.status} ({workload.status_reason}: {workload.status_message}), "
                f"wanted {statuses}; events: {list(workload.events.values_list('reason', 'message'))}")
        time.sleep(0.1)
