"""The interface every execution backend implements, and how a workload finds its backend.

A backend only realises and observes replicas (processes, pods, Slurm steps); it never writes
workload status: its reconciler reports what it sees to `apps.workloads.lifecycle`, through the
shared dispatch / claim / stop helpers of `apps.backends.services`.

The contract is this ABC plus the optional capabilities a backend declares in its
`BackendSpec` (apps/clusters/backends.py) and implements as the small ABCs below
(`ReplicaScaling`); `check_declared` holds the two together. Nobody asks hasattr.
"""
from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

from apps.clusters.backends import BackendSpec

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

    def log_reader(self, workload: Workload, *, replica: int, attempt: int, tail: int | None) -> LogReader:
        """A reader that follows one replica's log of `attempt`, starting with its last `tail`
        lines (None: from the beginning). A backend that streams its logs (declared:
        BackendSpec.log_streaming) gives its own reader; by default `logs()` is polled."""
        return PollingLogReader(self, workload, replica=replica, attempt=attempt, tail_lines=tail)


class PollingLogReader(LogReader):
    """The reader of a backend that does not stream logs (BackendSpec.log_streaming False): each
    read asks the backend for the attempt's whole log and hands out what is new since the last."""

    POLL_SECONDS = 1.0

    def __init__(self, backend: Backend, workload: Workload, *, replica: int, attempt: int, tail_lines: int | None):
        super().__init__(workload_id=workload.pk, replica=replica, attempt=attempt, tail_lines=tail_lines)
        self._backend, self._workload = backend, workload
        self._seen: int | None = None  # characters of the log handed out; None: not looked yet
        self._looked_at = float("-inf")

    def read(self, *, final: bool = False) -> str:
        now = time.monotonic()
        if not final and now - self._looked_at < self.POLL_SECONDS:
            return ""
        self._looked_at = now
        text = self._backend.logs(self._workload, replica=self.replica, attempt=self.attempt)
        if self._seen is None:
            start = len(text)
            if self.tail_lines is None:
                start = 0
            elif self.tail_lines > 0:
                lines = text.splitlines(keepends=True)
                start = len(text) - len("".join(lines[-self.tail_lines:]))
            self._seen = start
        if len(text) < self._seen:  # the log started over (a new pod): from its beginning
            self._seen = 0
        chunk = text[self._seen:self._seen + LOG_FRAME_CHARS]
        self._seen += len(chunk)
        return chunk

    def switch(self, attempt: int) -> str:
        self.attempt, self._seen, self.tail_lines, self._looked_at = attempt, None, None, float("-inf")
        return ""


class ReplicaScaling(ABC):
    """Declared capability (BackendSpec.replica_scaling): the backend starts, checks and stops
    single replicas of a running attempt, next to the others (a service scaled up or down, a
    replica restarted alone, a rolling update replica by replica: apps/backends/scaling.py)."""

    @abstractmethod
    def launch_replica(self, workload: Workload, *, replica: int, spec: dict | None = None) -> dict:
        """Start (again) one replica of the current attempt; returns its runtime record."""

    @abstractmethod
    def replica_alive(self, record: dict) -> bool:
        """Whether the replica of this runtime record still runs."""

    @abstractmethod
    def stop_replica(self, record: dict, *, force: bool = False) -> bool:
        """SIGTERM (force: SIGKILL) one replica."""


# -- registration --------------------------------------------------------------------------------
# Each backend is a package (apps/backends/<name>/) whose __init__ declares, without importing
# anything heavy:
#   SPEC        its apps.clusters.backends.BackendSpec (name, capabilities, hooks)
#   BACKEND     the dotted path of its Backend class
#   RECONCILER  the dotted path of its reconciler loop: (stop: threading.Event, interval: float) -> None
# settings.CAIRN_BACKENDS lists the packages; apps.backends registers them at ready().


def backend_packages() -> dict[str, ModuleType]:
    """backend name -> its package, for every package in settings.CAIRN_BACKENDS."""
    from django.conf import settings

    found = {}
    for path in settings.CAIRN_BACKENDS:
        package = importlib.import_module(path)
        found[package.SPEC.name] = package
    return found


def load(path: str):
    module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


_instances: dict[str, Backend] = {}


def backend_named(name: str) -> Backend:
    """The backend of this name. A backend whose module cannot be imported (say, the `kubernetes`
    client is not installed) or that is not installed here raises BackendUnavailable; its
    workloads fail with that reason."""
    if name in _instances:
        return _instances[name]
    package = backend_packages().get(name)
    if package is None:
        raise BackendUnavailable(f"Unknown backend '{name}'.")
    try:
        cls = load(package.BACKEND)
    except (ImportError, AttributeError) as exc:
        raise BackendUnavailable(f"The {name} backend is not available in this installation ({exc}).") from exc
    check_declared(cls, package.SPEC)
    _instances[name] = cls()
    return _instances[name]


def check_declared(cls: type, spec: BackendSpec) -> None:
    """A backend class implements exactly the capabilities its spec declares."""
    if issubclass(cls, ReplicaScaling) != spec.replica_scaling:
        raise TypeError(f"{cls.__name__}: BackendSpec.replica_scaling={spec.replica_scaling} but the class "
                        f"{'does not implement' if spec.replica_scaling else 'implements'} ReplicaScaling.")
    if (cls.log_reader is not Backend.log_reader) != spec.log_streaming:
        raise TypeError(f"{cls.__name__}: BackendSpec.log_streaming={spec.log_streaming} but the class "
                        f"{'polls its logs' if spec.log_streaming else 'streams its logs'}.")
    if cls.name != spec.name:
        raise TypeError(f"{cls.__name__}.name is {cls.name!r}, its spec says {spec.name!r}.")


def backend_for(workload: Workload) -> Backend:
    """The backend of the cluster the workload's pool belongs to."""
    return backend_named(workload.pool.cluster.backend)
