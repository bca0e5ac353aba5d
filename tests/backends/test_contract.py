"""The backend contract (apps/backends/base.py): every backend of settings.CAIRN_BACKENDS loads and
implements exactly the capabilities its BackendSpec declares; a backend that does not stream its
logs gets the polling reader."""
import pytest

from apps.backends.base import Backend, PollingLogReader, ReplicaScaling, backend_named, backend_packages, check_declared
from apps.clusters.backends import BackendSpec, backend_spec


class _Quiet(Backend):
    """A backend with in-memory logs and nothing else."""

    name = "quiet"

    def __init__(self):
        self.text = ""

    def launch(self, workload, *, attempt, run_env=None):
        return {}

    def signal(self, workload, *, force=False):
        return 0

    def observe(self, workload):
        return []

    def logs(self, workload, *, replica, attempt, tail=None):
        return self.text


class _Workload:
    pk = 7


def test_every_configured_backend_loads_and_declares_what_it_implements():
    packages = backend_packages()
    assert {"local", "kubernetes", "slurm"} <= set(packages)
    for name, package in packages.items():
        backend = backend_named(name)
        assert backend.name == name and backend_spec(name) == package.SPEC
        assert isinstance(backend, ReplicaScaling) == package.SPEC.replica_scaling
    assert backend_spec("local").replica_scaling and not backend_spec("slurm").replica_scaling
    assert backend_spec("kubernetes").rollout_progress and backend_spec("kubernetes").container_workdir


def test_a_spec_that_does_not_match_its_class_is_refused():
    with pytest.raises(TypeError, match="replica_scaling=True"):
        check_declared(_Quiet, BackendSpec(name="quiet", label="Quiet", replica_scaling=True, log_streaming=False))
    with pytest.raises(TypeError, match="log_streaming=True"):
        check_declared(_Quiet, BackendSpec(name="quiet", label="Quiet"))
    check_declared(_Quiet, BackendSpec(name="quiet", label="Quiet", log_streaming=False))


def test_a_backend_that_does_not_stream_its_logs_is_polled(monkeypatch):
    monkeypatch.setattr(PollingLogReader, "POLL_SECONDS", 0.0)
    backend = _Quiet()
    backend.text = "one\ntwo\nthree\n"
    reader = backend.log_reader(_Workload(), replica=0, attempt=1, tail=2)
    assert isinstance(reader, PollingLogReader)
    assert reader.read() == "two\nthree\n"
    assert reader.read() == ""
    backend.text += "four\n"
    assert reader.read() == "four\n"
    backend.text = "again\n"  # a new attempt's log, shorter: from its beginning
    assert reader.switch(2) == "" and reader.read() == "again\n"
