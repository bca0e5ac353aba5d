"""What the apps below the backends may know of a backend: its declared contract.

A cluster names its backend (`Cluster.backend`); the apps between clusters and backends
(workloads, the kinds, telemetry) may not import `apps.backends`, and must not test a backend's
name either. They ask for the backend's `BackendSpec` instead: the optional capabilities it
declares and the hooks it fills. Each backend package declares its spec next to its code
(`apps/backends/<name>/__init__.py`, SPEC) and `apps.backends` registers every package listed
in settings.CAIRN_BACKENDS here at AppConfig.ready() (the seam `register_backend`).

tests/core/test_backend_names.py fails when code outside apps/backends tests a backend's name
or probes a backend with hasattr.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BackendSpec:
    name: str  # Cluster.backend
    label: str  # for humans (admin, API)
    # -- optional capabilities ------------------------------------------------------------------
    # Cairn starts, stops and replaces single replicas of a running service (scale up and down,
    # a replica restarted alone, rolling updates replica by replica, readiness probes).
    replica_scaling: bool = False
    # The backend rolls a deployment out itself (its own controller) and reports the progress in
    # the workload's runtime ("main_rollout", "canary", one "url" in front of the replicas).
    rollout_progress: bool = False
    # `working_dir` is a path inside the replica's container image; otherwise it is a path on the
    # nodes' file system, checked against the pool's allowed directories.
    container_workdir: bool = False
    # Whether a replica may ask for a fraction of a device (accelerator.count < 1) on a cluster:
    # (cluster, accelerator type) -> bool.
    shared_accelerators: Callable[[Any, str], bool] = lambda cluster, kind: False
    # The backend follows a replica's log as it is written (the live log topic, ?follow=1);
    # without it, readers poll the backend's whole log.
    log_streaming: bool = True
    # The replicas run on the machine Cairn runs on, from its disk (tools Cairn installs, such as
    # code-server, must be on this server).
    runs_on_this_machine: bool = False
    # Telemetry: "this_machine" (sampled by Cairn itself), "exporter" (each node's metrics
    # exporter is scraped by node name), "" (none).
    node_telemetry: str = ""
    # -- hooks ----------------------------------------------------------------------------------
    # (config dict) -> the config to store; raises ValueError with a message for a bad one.
    check_config: Callable[[dict], dict] = lambda config: dict(config)
    # (connection, *, timeout) -> {"ok", "version", "detail"}: reach the cluster with its credentials.
    credential_probe: Callable[..., dict] | None = None
    # (workload, token) -> Upstream | None: how the notebook proxy reaches a notebook.
    notebook_upstream: Callable[..., Any] | None = None


_specs: dict[str, BackendSpec] = {}


def register_backend(spec: BackendSpec) -> None:
    """Declare a backend (apps.backends at ready(), once per package in CAIRN_BACKENDS)."""
    _specs[spec.name] = spec


def backend_spec(name: str) -> BackendSpec:
    """The spec of a backend; an unknown name (a backend this installation does not have) gets a
    spec with no capability, so callers need no special case."""
    return _specs.get(name) or BackendSpec(name=name, label=name)


def backend_specs() -> list[BackendSpec]:
    return list(_specs.values())


def backend_choices() -> list[tuple[str, str]]:
    return [(spec.name, spec.label) for spec in _specs.values()]
