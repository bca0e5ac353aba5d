"""The interface every execution backend implements, and how a workload finds its backend.

A backend only realises and observes replicas (processes, pods); it never writes workload
status. The services in `apps.backends.services` decide what an observation means.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

# What a backend observes of one replica, defined with the decisions taken from it (apps.workloads)
from apps.workloads.observations import EXITED as EXITED
from apps.workloads.observations import LOST as LOST
from apps.workloads.observations import RUNNING as RUNNING
from apps.workloads.observations import ReplicaState as ReplicaState

if TYPE_CHECKING:
    from apps.workloads.models import Workload


class BackendUnavailable(Exception):
    """The workload's cluster uses a backend this installation cannot drive."""


class TransientBackendError(Exception):
    """The backend's control plane failed in a way that may pass (5xx, timeouts): retry later.
    Nothing was decided; the workload keeps its status."""


class LaunchError(Exception):
    """Replicas could not be started at all (bad working directory, no free port, ...)."""


LOG_FRAME_CHARS = 256 * 1024  # at most about this much output per LogReader.read() (one websocket frame)


class LogReader(ABC):
    """Follows the log of one replica, `tail -f` style, one bounded step at a time: the live
    websocket topic `logs:<id>:<r>` and `GET .../logs/?follow=1` call `read()` in a worker thread,
    look at the workload's status and attempt themselves, and stop by not calling it again.

    Made by `Backend.log_reader()` in a synchronous context (that may read the database); `read`,
    `switch` and `finish` never touch the database, so they may run in any thread.
    """

    def __init__(self, *, workload_id: int, replica: int, attempt: int, tail_lines: int | None):
        self.workload_id = workload_id
        self.replica = replica
        self.attempt = attempt
        self.tail_lines = tail_lines  # lines to start with (None: all); a switched-to attempt starts at 0

    @abstractmethod
    def read(self, *, final: bool = False) -> str:
        """New output since the last call (at most about LOG_FRAME_CHARS), '' when there is none.

        A reader whose log is remote may skip looking when asked again too soon (it polls at its
        own pace); `final=True`, for draining an attempt that is over, always looks."""

    @abstractmethod
    def switch(self, attempt: int) -> str:
        """Carry on with a later attempt's log from its beginning; returns what was held back."""

    def finish(self) -> str:
        """Output held back until the end (an incomplete UTF-8 sequence, say); '' by default."""
        return ""


class Backend(ABC):
    """Realise, signal, observe and read the logs of a workload's replicas."""

    name: ClassVar[str]

    @abstractmethod
    def launch(self, workload: Workload, *, attempt: int, run_env: dict[str, str] | None = None) -> dict:
        """Start every replica of `attempt`; return the bookkeeping to store in workload.runtime.

        `run_env`: what the apps above give the attempt's replicas (apps.backends.launch_env),
        computed and committed by the caller; None: the backend asks for it itself.

        Launching an attempt again (its first launch was interrupted) must not start a replica
        twice: the backend adopts the replicas of the attempt that already run and starts the
        missing ones.

        Raises LaunchError when nothing could be started (whatever was started is cleaned up).
        """

    def started(self, workload: Workload, *, attempt: int) -> list[dict]:
        """The replica records of `attempt` that an interrupted launch already started, so that
        they can be stopped. Default: none (a backend whose `observe` finds replicas by their
        labels, as Kubernetes does, sees them anyway)."""
        return []

    @abstractmethod
    def signal(self, workload: Workload, *, force: bool = False) -> int:
        """Ask every live replica to exit (SIGTERM), or make it (force: SIGKILL). Returns how many."""

    @abstractmethod
    def observe(self, workload: Workload) -> list[ReplicaState]:
        """The state of each replica of the workload's current attempt (per workload.runtime)."""

    @abstractmethod
    def logs(self, workload: Workload, *, replica: int, attempt: int, tail: int | None = None) -> str:
        """The captured output of one replica of one attempt ('' when there is none); tail = only
        the last N lines. Raises TransientBackendError when the control plane keeps failing."""

    def checkpoint_env(self, workload: Workload) -> dict[str, str]:
        """CAIRN_CHECKPOINT_DIR for a workload that runs to completion: a folder kept across its
        attempts (cairn.checkpoint). Empty when the backend offers none."""
        return {}

    def last_output_at(self, workload: Workload, *, replica: int, attempt: int) -> float | None:
        """When the replica last wrote output (epoch seconds), if the backend can tell (hang detection)."""
        return None

    def diagnose(self, workload: Workload, *, replicas: list[int]) -> str:
        """A diagnosis of stuck replicas (their Python stacks) for an event attachment; '' if none."""
        return ""

    @abstractmethod
    def log_reader(self, workload: Workload, *, replica: int, attempt: int, tail: int | None) -> LogReader:
        """A reader that follows one replica's log of `attempt`, starting with its last `tail`
        lines (None: from the beginning)."""


# backend name -> dotted path of its class. A backend whose module cannot be imported (say, the
# `kubernetes` client is not installed) fails its workloads with BackendUnavailable.
BACKENDS: dict[str, str] = {
    "local": "apps.backends.local.backend.LocalBackend",
    "kubernetes": "apps.backends.kubernetes.backend.KubernetesBackend",
}
_instances: dict[str, Backend] = {}


def backend_named(name: str) -> Backend:
    if name in _instances:
        return _instances[name]
    path = BACKENDS.get(name)
    if path is None:
        raise BackendUnavailable(f"Unknown backend '{name}'.")
    module_name, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise BackendUnavailable(f"The {name} backend is not available in this installation ({exc}).") from exc
    _instances[name] = cls()
    return _instances[name]


def backend_for(workload: Workload) -> Backend:
    """The backend of the cluster the workload's pool belongs to."""
    return backend_named(workload.pool.cluster.backend)
