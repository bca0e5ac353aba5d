"""Request metrics of the gateway, per deployment and per replica.

Every request the gateway forwards (or answers itself for a known deployment: 503, 504, 413)
is counted here, in this server process. A 503 the gateway gives itself because no replica took
the request (none ready, every one refused the connection) is no replica's traffic: it counts
under replica "" and as `serve.gateway_rps`, never in a replica's or the deployment's `rps` and
latencies (curl's retry loop against a deployment starting up would otherwise show as traffic).

- Prometheus series (prometheus-client), exported at /metrics by apps.telemetry:
  `cairn_deployment_requests_total{project,deployment,replica,code}` (code: 2xx..5xx),
  `cairn_deployment_request_duration_seconds{project,deployment,replica}` (a histogram) and
  `cairn_deployment_requests_in_flight{project,deployment,replica}`. Replica "" is an answer of
  the gateway itself (no replica took the request).
- A window that `flush()` turns into telemetry samples every SERVE_METRICS_INTERVAL_SECONDS: the
  gateway's flusher hands them to the sink apps.telemetry registers (stored as TelemetrySample
  rows of the deployment, node `gateway:<host>:<pid>`, and published live on the workload's topic).
  Metrics, for the deployment (`serve.<stat>`) and for each replica (`serve.<stat>.r<n>`):
  rps (requests replicas answered per second), concurrency (average requests in flight over the
  window, the autoscaler's input), in_flight (at the end of the window), p50_ms/p95_ms/p99_ms
  (latency of the requests replicas answered in the window, from the request's arrival to the end
  of its answer), s2xx/s3xx/s4xx/s5xx (every answer the clients got per second, by status class),
  and for the deployment gateway_rps (answers the gateway gave itself per second: no replica took
  them). A window with nothing in it after one with traffic still gives its zeros, once: a rate
  drops to 0 when traffic stops instead of keeping its last value.
"""
from __future__ import annotations

import itertools
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

LABELS = ["project", "deployment", "replica"]
REQUESTS = Counter("cairn_deployment_requests", "Requests answered through the gateway, by status class",
                   [*LABELS, "code"], registry=None)
DURATION = Histogram("cairn_deployment_request_duration_seconds",
                     "Time from a request's arrival at the gateway to the end of its answer", LABELS, registry=None,
                     buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
IN_FLIGHT = Gauge("cairn_deployment_requests_in_flight", "Requests in flight through the gateway", LABELS,
                  registry=None)
PROMETHEUS = (REQUESTS, DURATION, IN_FLIGHT)

STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
_children: dict[tuple, object] = {}  # (metric, label values) -> prometheus child, looked up once


def _series(metric, *labels: str):
    """`metric.labels(*labels)`, kept: prometheus-client takes a lock and checks the labels on each call."""
    key = (metric, labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*labels)
    return found


@dataclass(frozen=True)
class ServeSample:
    workload_id: int
    metric: str
    value: float
    node: str


@dataclass
class _Window:
    finished: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds
    busy: float = 0.0  # request-seconds spent in flight inside the window
    own: int = 0  # answered by the gateway itself: no replica took them


@dataclass
class _InFlight:
    workload_id: int
    replica: int | None
    labels: tuple[str, str, str]
    started: float
    replied: bool = False  # a replica's answer (headers) came back


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _class(status: int) -> str:
    return f"{min(max(status // 100, 2), 5)}xx"


class ServeMetrics:
    """The counters of one process; thread-safe (the gateway may run on several event loops)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.lock = threading.Lock()
        self.windows: dict[tuple[int, int | None], _Window] = {}
        self.in_flight: dict[int, _InFlight] = {}
        self.window_start = clock()
        self.last_keys: set[tuple[int, int | None]] = set()  # the keys the last flush gave samples for
        self.ids = itertools.count()
        self.node = f"gateway:{socket.gethostname()}:{os.getpid()}"

    def start(self, *, workload_id: int, project: str, name: str, replica: int | None) -> int:
        labels = (project, name, "" if replica is None else str(replica))
        token = next(self.ids)
        with self.lock:
            self.in_flight[token] = _InFlight(workload_id, replica, labels, self.clock())
        _series(IN_FLIGHT, *labels).inc()
        return token

    def assign(self, token: int, replica: int | None) -> None:
        """The request went to `replica` (a retry may move it to another)."""
        with self.lock:
            entry = self.in_flight.get(token)
            if entry is None or entry.replica == replica:
                return
            old = entry.labels
            entry.replica = replica
            entry.labels = (old[0], old[1], "" if replica is None else str(replica))
        _series(IN_FLIGHT, *old).dec()
        _series(IN_FLIGHT, *entry.labels).inc()

    def replied(self, token: int) -> None:
        """A replica answered the request (its status line came back): a 503 then is its own."""
        with self.lock:
            entry = self.in_flight.get(token)
            if entry is not None:
                entry.replied = True

    def finish(self, token: int, status: int) -> None:
        now = self.clock()
        with self.lock:
            entry = self.in_flight.pop(token, None)
            if entry is None:
                return
            elapsed = now - entry.started
            busy = now - max(entry.started, self.window_start)
            counted = entry.labels
            own = entry.replica is None or (status == 503 and not entry.replied)
            if own and entry.replica is not None:  # tried replicas refused it: the gateway's answer
                window = self.windows.setdefault((entry.workload_id, entry.replica), _Window())
                window.busy += busy  # it was in flight there while the gateway tried it
                counted = (*entry.labels[:2], "")
            window = self.windows.setdefault((entry.workload_id, None), _Window())
            window.classes[_class(status)] = window.classes.get(_class(status), 0) + 1
            window.busy += busy
            if own:
                window.own += 1
            else:
                window.finished += 1
                window.latencies.append(elapsed)
                replica = self.windows.setdefault((entry.workload_id, entry.replica), _Window())
                replica.finished += 1
                replica.classes[_class(status)] = replica.classes.get(_class(status), 0) + 1
                replica.latencies.append(elapsed)
                replica.busy += busy
        _series(IN_FLIGHT, *entry.labels).dec()
        _series(REQUESTS, *counted, _class(status)).inc()
        if not own:
            _series(DURATION, *counted).observe(elapsed)

    def flush(self) -> list[ServeSample]:
        """The window's figures as samples; starts a new window."""
        now = self.clock()
        with self.lock:
            span = max(now - self.window_start, 1e-6)
            windows, self.windows = self.windows, {}
            flying: dict[tuple[int, int | None], int] = {}
            for entry in self.in_flight.values():
                keys = [(entry.workload_id, None)] + ([(entry.workload_id, entry.replica)]
                                                     if entry.replica is not None else [])
                for key in keys:
                    windows.setdefault(key, _Window()).busy += now - max(entry.started, self.window_start)
                    flying[key] = flying.get(key, 0) + 1
            for key in self.last_keys - set(windows):  # traffic stopped: its zeros, once
                windows[key] = _Window()
            self.last_keys = {key for key, window in windows.items() if window.finished or window.own or window.busy
                              or window.classes or key in flying}
            self.window_start = now
        samples = []
        for (workload_id, replica), window in windows.items():
            suffix = "" if replica is None else f".r{replica}"

            def add(stat: str, value: float, workload_id=workload_id, suffix=suffix):
                samples.append(ServeSample(workload_id, f"serve.{stat}{suffix}", float(value), self.node))

            add("rps", window.finished / span)
            add("concurrency", window.busy / span)
            add("in_flight", flying.get((workload_id, replica), 0))
            if window.latencies:
                ordered = sorted(window.latencies)
                for q in (50, 95, 99):
                    add(f"p{q}_ms", _quantile(ordered, q / 100) * 1000)
            for name in STATUS_CLASSES:
                add(f"s{name}", window.classes.get(name, 0) / span)
            if replica is None:
                add("gateway_rps", window.own / span)
        return samples


metrics = ServeMetrics()

# Where flushed samples go: set by apps.telemetry at ready() (it stores them with the telemetry).
_sink: Callable[[list[ServeSample]], None] | None = None


def register_sink(sink: Callable[[list[ServeSample]], None] | None) -> None:
    global _sink
    _sink = sink


def sink() -> Callable[[list[ServeSample]], None] | None:
    return _sink


# How the autoscaler reads the stored concurrency samples: set by apps.telemetry at ready().
# reader(workload_ids, since_unix_seconds) -> {workload_id: [autoscaler.Sample, ...]}
_window_reader: Callable[[list[int], float], dict] | None = None


def register_window_reader(reader: Callable[[list[int], float], dict] | None) -> None:
    global _window_reader
    _window_reader = reader


def window_reader() -> Callable[[list[int], float], dict] | None:
    return _window_reader
