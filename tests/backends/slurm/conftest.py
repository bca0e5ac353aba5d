"""Fixtures for the Slurm backend: a real Slurm (munged, slurmctld, one slurmd per node) started
once per test session (per xdist worker) from testbed.py, in a temporary directory."""
import os

import pytest

from .testbed import SlurmCluster, SlurmError, missing_programs


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
