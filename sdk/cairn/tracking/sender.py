"""The background sender of the in-job logger.

`log()` only appends to a bounded in-memory buffer and returns: it never does I/O, never
blocks on the network, never raises. A daemon thread takes batches from the buffer and posts
them to `/runs/<id>/batches/`, retrying with exponential backoff (same batch id, so a batch
whose answer was lost is not stored twice). When the buffer is full the oldest points are
dropped and counted. Errors that retrying cannot fix (400, 401, 403, 404, 409, 413) drop the
batch with one warning.
"""
from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("cairn.tracking")

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
FATAL_RUN_STATUSES = frozenset({401, 403, 404})


@dataclass
class SenderStats:
    sent_points: int = 0
    sent_batches: int = 0
    dropped_points: int = 0
    rejected_points: int = 0
    retries: int = 0
    last_error: str | None = None
    errors: list[str] = field(default_factory=list)


class Sender:
    """Buffers points and params and sends them from one daemon thread.

    `resolve_run()` is called (in the thread, retried like a batch) until it returns
    (batches_url, headers): standalone runs are created lazily so that `init()` never waits."""

    def __init__(
        self,
        *,
        resolve_run: Callable[[Any], tuple[str, dict[str, str]]],
        batch_size: int = 5000,
        flush_interval: float = 0.5,
        max_buffer: int = 200_000,
        timeout: tuple[float, float] = (3.0, 30.0),
        backoff_max: float = 10.0,
        session_factory: Callable[[], Any] | None = None,
    ) -> None:
        self._resolve_run = resolve_run
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.timeout = timeout
        self.backoff_max = backoff_max
        self._session_factory = session_factory
        self._points: deque = deque()
        self._params: dict[str, Any] = {}
        self._progress: dict | None = None  # {"replica", "step", "steps": [[step, seconds], ...]}
        self._cond = threading.Condition()
        self._inflight: dict | None = None
        self._closing = False
        self._disabled = False
        self._flush_waiters = 0
        self._target: tuple[str, dict[str, str]] | None = None
        self.stats = SenderStats()
        self._warned: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="cairn-sender", daemon=True)
        self._thread.start()

    # ---- called from the training script: cheap, non-blocking, never raises ----

    def add_points(self, points: list[tuple[str, int, float, float]]) -> None:
        with self._cond:
            if self._disabled or self._closing:
                return
            self._points.extend(points)
            overflow = len(self._points) - self.max_buffer
            if overflow > 0:
                for _ in range(overflow):
                    self._points.popleft()
                self.stats.dropped_points += overflow
                self._warn_once("overflow", f"cairn: buffer full ({self.max_buffer} points), dropping the oldest")
            if len(self._points) >= self.batch_size:
                self._cond.notify_all()
            elif len(self._points) == len(points):  # was empty: wake the sender (it rate-limits itself)
                self._cond.notify_all()

    def add_params(self, params: dict[str, Any]) -> None:
        with self._cond:
            if self._disabled or self._closing:
                return
            self._params.update(params)
            self._cond.notify_all()

    def add_progress(self, replica: int, step: int, steps: list[tuple[int, float]], done: bool = False) -> None:
        """The rank's latest step and the step times since the last report: sent with the next batch.
        `done`: the rank is finishing (cairn.finish), so a quiet shutdown is not taken for a hang."""
        with self._cond:
            if self._disabled or self._closing:
                return
            if self._progress is None:
                self._progress = {"replica": replica, "step": step, "steps": []}
                self._cond.notify_all()
            self._progress["step"] = step
            if done:
                self._progress["done"] = True
            self._progress["steps"] = (self._progress["steps"] + [[s, round(t, 6)] for s, t in steps])[-500:]

    def pending(self) -> int:
        with self._cond:
            return len(self._points) + (len(self._inflight["points"]) if self._inflight else 0)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything buffered so far is sent (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._flush_waiters += 1
            self._cond.notify_all()
            try:
                while self._points or self._params or self._progress or self._inflight:
                    if self._disabled:
                        return False
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(min(remaining, 0.1))
                return True
            finally:
                self._flush_waiters -= 1

    def close(self, timeout: float = 30.0) -> bool:
        ok = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=1.0)
        return ok

    def target(self) -> tuple[str, dict[str, str]] | None:
        return self._target

    # ---- the thread ----

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(message)

    def _session(self):
        if self._session_factory is not None:
            return self._session_factory()
        from .transport import Session

        return Session()

    def _run(self) -> None:
        try:
            session = self._session()
        except Exception as exc:  # noqa: BLE001 - the training script must never see this
            logger.warning("cairn: tracking disabled, no HTTP client: %s", exc)
            self._disable()
            return
        attempt = 0
        last_send = 0.0
        while True:
            with self._cond:
                while not (self._points or self._params or self._progress or self._inflight) and not self._closing:
                    self._cond.wait(1.0)
                if self._closing and not (self._points or self._params or self._progress or self._inflight):
                    return
                # Coalesce: at most one request per flush_interval unless a full batch or a flush waits.
                wait = last_send + self.flush_interval - time.monotonic()
                if wait > 0 and not self._inflight and len(self._points) < self.batch_size and not self._flush_waiters:
                    self._cond.wait(wait)
                    continue
                if self._inflight is None:
                    self._inflight = self._take()
                batch = self._inflight
            # The interval runs from the start of a request: a script logging once per interval
            # has each point sent as it comes, not a request's duration later each time.
            last_send = time.monotonic()
            outcome = self._send(session, batch)
            if outcome == "retry":
                attempt += 1
                self.stats.retries += 1
                delay = min(self.backoff_max, 0.2 * 2 ** min(attempt, 10)) * (0.5 + random.random() / 2)
                with self._cond:
                    if self._closing:
                        return
                    self._cond.wait(delay)
                continue
            attempt = 0
            with self._cond:
                self._inflight = None
                if outcome == "fatal":
                    self._disabled = True
                    self.stats.dropped_points += len(self._points)
                    self._points.clear()
                    self._params.clear()
                    self._progress = None
                self._cond.notify_all()
                if self._disabled:
                    return

    def _disable(self) -> None:
        with self._cond:
            self._disabled = True
            self._points.clear()
            self._params.clear()
            self._progress = None
            self._inflight = None
            self._cond.notify_all()

    def _take(self) -> dict:
        n = min(self.batch_size, len(self._points))
        points = [self._points.popleft() for _ in range(n)]
        params, self._params = self._params, {}
        progress, self._progress = self._progress, None
        return {"batch_id": uuid.uuid4().hex, "points": points, "params": params, "progress": progress}

    def _send(self, session, batch: dict) -> str:
        """'ok', 'retry' (connection error, 5xx, 429), 'dropped' (this batch is bad) or 'fatal' (run gone)."""
        if self._target is None:
            try:
                self._target = self._resolve_run(session)
            except _Fatal as exc:
                self._warn_once("fatal", f"cairn: tracking disabled: {exc}")
                self.stats.last_error = str(exc)
                return "fatal"
            except Exception as exc:  # noqa: BLE001
                self.stats.last_error = str(exc)
                self._warn_once("unreachable", f"cairn: server unreachable, buffering points and retrying ({exc})")
                return "retry"
        url, headers = self._target
        body = {"batch_id": batch["batch_id"],
                "points": [{"key": k, "step": s, "value": v, "time": t} for k, s, v, t in batch["points"]]}
        if batch["params"]:
            body["params"] = batch["params"]
        if batch.get("progress"):
            body["progress"] = batch["progress"]
        try:
            response = session.post(url, json=body, headers=headers, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - connection refused, timeout, reset...
            self.stats.last_error = str(exc)
            self._warn_once("unreachable", f"cairn: server unreachable, buffering points and retrying ({exc})")
            return "retry"
        status = response.status_code
        if status < 300:
            self._warned.discard("unreachable")
            self.stats.sent_points += len(batch["points"])
            self.stats.sent_batches += 1
            return "ok"
        detail = _detail(response)
        self.stats.last_error = f"HTTP {status}: {detail}"
        if status in RETRY_STATUSES:
            return "retry"
        if status in FATAL_RUN_STATUSES:
            self._warn_once("fatal", f"cairn: tracking disabled, the server refused this run (HTTP {status}: {detail})")
            self.stats.dropped_points += len(batch["points"])
            return "fatal"
        logger.warning("cairn: a batch of %d points was rejected (HTTP %s: %s)", len(batch["points"]), status, detail)
        self.stats.rejected_points += len(batch["points"])
        self.stats.errors.append(detail)
        return "dropped"


class _Fatal(Exception):
    """The run cannot be created or written (bad token, no such project): stop trying."""


def _detail(response) -> str:
    try:
        return str(response.json().get("detail"))
    except Exception:  # noqa: BLE001
        return (response.text or "")[:200]
