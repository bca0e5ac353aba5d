"""What the layers above workloads need to know about each workload kind, in one place.

Each kind app (training, notebooks, deployments) registers a `KindSpec` from its
`AppConfig.ready()`; the backends ask `kind_spec(workload.kind)` for the
properties they act on instead of comparing kind names. Adding a kind: give it a value in
`choices.Kind`, an app with its API, and register its spec in that app's `ready()`.

Plain Python: no models, no Django, so any layer may import it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class LaunchRefused(Exception):
    """Raised by a kind's `local_command` when this server cannot run it (the backend fails the
    launch with the message)."""


@dataclass(frozen=True)
class KindSpec:
    kind: str  # a choices.Kind value
    # The kind's API collection under /api/v1/projects/<slug>/ ("training-jobs"), and its name for
    # people ("Training job"). GET /api/v1/kinds/ serves both, so clients keep no list of kinds.
    route: str = ""
    label: str = ""
    # The DRF viewset of that collection (create, list, inspect, stop, delete; usually a
    # KindWorkloadViewSet subclass). apps/portal/api/urls.py routes every registered kind's.
    api_viewset: Any = None
    # Runs to completion: each attempt is a run that ends (success, failure, restart within
    # max_restarts and the run-time limit); the others are services kept up until stopped.
    runs_to_completion: bool = False
    # Each replica listens on a port ($PORT) that Cairn hands it, and the workload has a URL.
    serves_port: bool = False
    # An access token is made per workload and given to replicas in JUPYTER_TOKEN (never on the
    # command line), and shown to the creator with the URL.
    access_token: bool = False
    # Reached through Cairn's gateway: sandboxed local replicas get no network, only the
    # gateway's unix socket. `gateway_url(workload)` is the address when no replica has a port.
    gateway_url: Callable[[Any], str] | None = None
    # The command a local replica runs when the kind decides it (not the spec's `command`):
    # local_command(workload, port=..., cwd=..., as_root=...) -> argv.
    local_command: Callable[..., list[str]] | None = None
    # Directories a sandboxed local replica of this kind reads besides Cairn's Python and the
    # system's (mounted read-only): local_mounts(workload) -> paths (a notebook: code-server's install).
    local_mounts: Callable[[Any], list[str]] | None = None
    # The host a local replica's port is bound on and reached at (recorded in its URL), when the
    # kind's command binds elsewhere than 127.0.0.1: local_host() -> host name or address.
    local_host: Callable[[], str] | None = None
    # What of the access token a local replica gets in its environment: local_token_env(workload,
    # token) -> env (a JupyterLab notebook: only the token's SHA-256). Default: JUPYTER_TOKEN.
    local_token_env: Callable[[Any, str], dict[str, str]] | None = None
    # The Kubernetes object that runs the replicas: Job (one per attempt), StatefulSet or Deployment.
    kubernetes_object: str = "Job"
    # Replicas are independent (a service behind a load balancer, not a gang): one that fails is
    # restarted alone while the others keep serving, and their number may change while it runs.
    independent_replicas: bool = False
    # probe_ready(workload, replica_record) -> bool: may this replica get traffic now? Called by
    # the local reconciler for every live replica at each pass; None: ready as soon as it runs.
    probe_ready: Callable[[Any, dict], bool] | None = None
    # revision_plan(workload) -> (max_unavailable, stable, {replica: (revision, spec)}): which revision
    # each replica should run and the spec to start it with (rolling updates, canaries); `stable` is
    # the revision of replicas started with the workload's own spec; `max_unavailable` counts
    # against all of `workload.replicas` (a rollout's admitted surge included; 0: none may go
    # now). None: one revision.
    revision_plan: Callable[[Any], tuple[int, int, dict[int, tuple[int, dict]]]] | None = None

    # endpoint(workload, user=, role=) -> where a running replica is reached by this user, or None
    # (a notebook's IDE for its creator, a deployment's URL for those who may call it). Called
    # only for a RUNNING workload with a URL in its runtime and a signed-in user. None: no endpoint.
    endpoint: Callable[..., str | None] | None = None
    # Runs of this kind's workloads are listed even when nothing was logged to them. Services
    # (notebooks, deployments) leave an empty run per attempt; those are hidden by default.
    lists_empty_runs: bool = True

    # Scheduling hooks, for a kind whose running workloads ask the scheduler for more replicas (a
    # deployment's autoscaler and rollout surges); the scheduler calls them, it imports no kind app.
    # before_scheduling(): the kind's own work before each scheduling cycle, run with the scheduler's
    # leadership in a transaction of its own (a failure is logged and the cycle goes on).
    before_scheduling: Callable[[], object] | None = None
    # scale_ups() -> [(workload, extra replicas, row with `requested_at`)]: running workloads that want
    # more replicas now, each decided by the policy as a ScaleUp under the workload's id; the answer is
    # applied by scale_admit(workload_id=, placement=) (None when no longer wanted) or
    # scale_wait(workload_id=, reason=, waiting_on=).
    scale_ups: Callable[[], list[tuple[Any, int, Any]]] | None = None
    scale_admit: Callable[..., Any] | None = None
    scale_wait: Callable[..., None] | None = None

    @property
    def behind_gateway(self) -> bool:
        return self.gateway_url is not None


_registry: dict[str, KindSpec] = {}


def register_kind(spec: KindSpec) -> None:
    """Called from the kind app's AppConfig.ready(). Registering the same kind twice replaces it
    only with an equal spec (ready() may run again in tests); a different one is a mistake."""
    existing = _registry.get(spec.kind)
    if existing is not None and existing != spec:
        raise ValueError(f"Workload kind '{spec.kind}' is already registered with a different spec.")
    _registry[spec.kind] = spec


def kind_spec(kind: str) -> KindSpec:
    try:
        return _registry[kind]
    except KeyError:
        raise LookupError(f"Unknown workload kind '{kind}' (no app registered it).") from None


def registered_spec(kind: str) -> KindSpec | None:
    return _registry.get(kind)


def registered_kinds() -> tuple[str, ...]:
    return tuple(_registry)


def kind_route(kind: str) -> str:
    """The API collection of `kind`; a kind no app registered (rows left by an app since
    removed) is still reached through the kind-independent /workloads/ routes."""
    spec = _registry.get(kind)
    return spec.route if spec is not None and spec.route else "workloads"


def kind_label(kind: str) -> str:
    spec = _registry.get(kind)
    return spec.label if spec is not None and spec.label else kind
