"""The typed view of `Workload.runtime` for every reader outside the backends.

`Workload.runtime` is the backend's bookkeeping of the current attempt, a JSON object the backend
owns (apps/backends/services.py describes it). A few of its facts are read by other apps: the
address of a notebook or deployment, the replicas a gateway may call, the stragglers the
self-healing flagged, whether the run-time clock waits for the cluster's queue. They read them
through `Runtime`, never by indexing the JSON (tests/workloads/test_runtime.py greps for that), so
the keys and their types are written down once, here.

`Runtime.of(workload)` / `Runtime.from_json(value)` read; `to_json()` gives the JSON back with
every key it had, the ones this view does not know included (a backend's own keys are never
dropped by a write from another app); `replace(...)` and `without(...)` build a changed copy.
A malformed value reads as absent (the defaults below), never raises.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypedDict

# The keys read outside the backends.
BACKEND = "backend"  # the backend's name (BackendSpec.name)
ATTEMPT = "attempt"  # the attempt this bookkeeping is of
ALIVE = "alive"  # whether replicas of it may still run
REPLICAS = "replicas"  # per replica: ReplicaRecord (local backend: pid, port or socket, readiness)
DRAINING = "draining"  # replicas of a deployment being taken out (rolling update)
URL = "url"  # where a running notebook or deployment is reached (Cairn's side)
TOKEN = "token"  # a notebook's token, sealed (apps.clusters.crypto.seal)
IGNORED_ENV = "ignored_env"  # env keys of the spec Cairn set itself (shown to the user)
STRAGGLERS = "stragglers"  # ranks of the current attempt flagged as stragglers
SLOW_GROUPS = "slow_groups"  # groups of ranks slowed down together (a slow node, link)
SLOWDOWN = "slowdown"  # how much slower than its peers the job runs, when flagged
CLOCK_AWAITS_PODS = "clock_awaits_pods"  # launched into a cluster's queue: the clock waits (deadlines.py)
MAIN_ROLLOUT = "main_rollout"  # Kubernetes: the main Deployment's rollout counts (RolloutCounts)
CANARY = "canary"  # Kubernetes: the canary Deployment's counts and Service URL


class ReplicaRecord(TypedDict, total=False):
    """One replica of the attempt as a backend records it (the keys other apps read)."""
    replica: int
    revision: int | None
    ready: bool
    pid: int
    port: int
    socket: str


class RolloutCounts(TypedDict, total=False):
    """A Deployment's rollout as the Kubernetes controller reports it (main or canary)."""
    revision: int | None
    replicas: int
    updated: int
    ready: int
    complete: bool
    url: str


def _dicts(value: Any) -> tuple[dict, ...]:
    return tuple(item for item in value if isinstance(item, dict)) if isinstance(value, list) else ()


@dataclass(frozen=True)
class Runtime:
    """A read-only view of one `Workload.runtime` value (see the module docstring)."""

    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", MappingProxyType(dict(self.data)))

    # -- reading and writing the JSON ----------------------------------------------------------

    @classmethod
    def from_json(cls, value: Any) -> Runtime:
        """The view of a stored value (anything but an object reads as empty)."""
        return cls(value if isinstance(value, dict) else {})

    @classmethod
    def of(cls, workload: Any) -> Runtime:
        """The view of `workload.runtime`."""
        return cls.from_json(getattr(workload, "runtime", None))

    def to_json(self) -> dict:
        """The JSON to store: every key, known to this view or not."""
        return dict(self.data)

    def replace(self, **changes: Any) -> Runtime:
        """A copy with these keys set (e.g. `replace(alive=False)`)."""
        return Runtime({**self.data, **changes})

    def without(self, *keys: str) -> Runtime:
        """A copy without these keys."""
        return Runtime({k: v for k, v in self.data.items() if k not in keys})

    def only(self, keys: Iterable[str]) -> dict:
        """The JSON of these keys only (those present)."""
        return {key: self.data[key] for key in keys if key in self.data}

    def has(self, key: str) -> bool:
        return key in self.data

    # -- the facts -------------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        value = self.data.get(BACKEND)
        return value if isinstance(value, str) else ""

    @property
    def attempt(self) -> int | None:
        value = self.data.get(ATTEMPT)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def alive(self) -> bool | None:
        """Whether replicas may still run; None when the backend has not said (not launched)."""
        value = self.data.get(ALIVE)
        return value if isinstance(value, bool) else None

    @property
    def replicas(self) -> tuple[ReplicaRecord, ...]:
        return _dicts(self.data.get(REPLICAS))  # type: ignore[return-value]

    @property
    def draining(self) -> tuple[ReplicaRecord, ...]:
        return _dicts(self.data.get(DRAINING))  # type: ignore[return-value]

    @property
    def url(self) -> str:
        value = self.data.get(URL)
        return value if isinstance(value, str) else ""

    @property
    def sealed_token(self) -> str:
        """A notebook's token as stored (sealed; apps.clusters.crypto.unseal reads it)."""
        value = self.data.get(TOKEN)
        return value if isinstance(value, str) else ""

    @property
    def ignored_env(self) -> list[str]:
        value = self.data.get(IGNORED_ENV)
        return [str(key) for key in value] if isinstance(value, list) else []

    @property
    def stragglers(self) -> frozenset[int]:
        value = self.data.get(STRAGGLERS)
        return frozenset(r for r in value if isinstance(r, int)) if isinstance(value, list) else frozenset()

    @property
    def slow_groups(self) -> list[dict]:
        return list(_dicts(self.data.get(SLOW_GROUPS)))

    @property
    def slowdown(self) -> Any:
        """How much slower the job runs, as the self-healing recorded it; None when not flagged."""
        return self.data.get(SLOWDOWN) or None

    @property
    def clock_awaits_pods(self) -> bool:
        return bool(self.data.get(CLOCK_AWAITS_PODS))

    @property
    def main_rollout(self) -> RolloutCounts | None:
        """The main Deployment's counts (Kubernetes); None when the backend keeps none."""
        if MAIN_ROLLOUT not in self.data:
            return None
        value = self.data[MAIN_ROLLOUT]
        return value if isinstance(value, dict) else {}  # type: ignore[return-value]

    @property
    def canary(self) -> RolloutCounts | None:
        value = self.data.get(CANARY)
        return value if isinstance(value, dict) and value else None  # type: ignore[return-value]
