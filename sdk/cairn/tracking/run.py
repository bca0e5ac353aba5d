"""A tracked run seen from the training script: `Run.log()`, `log_params()`, `finish()`."""
from __future__ import annotations

import atexit
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from .sender import Sender, _detail, _Fatal

logger = logging.getLogger("cairn.tracking")

KEY_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/:]{0,199}$")


def _number(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    item = getattr(value, "item", None)  # numpy scalars, 0-d arrays, torch tensors
    try:
        return float(item() if callable(item) else value)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return None


class Run:
    """Use `cairn.init()` rather than building this directly."""

    def __init__(
        self,
        *,
        url: str,
        project: str,
        run_id: int | None = None,
        run_token: str | None = None,
        api_token: str | None = None,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        system_metrics: bool = True,
        system_interval: float = 5.0,
        flush_interval: float = 0.5,
        batch_size: int = 5000,
        max_buffer: int = 200_000,
        exit_timeout: float = 15.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.project = project
        self.id = run_id
        self.name = name
        self._run_token = run_token
        self._api_token = api_token
        self._client_id = str(uuid.uuid4())
        self._lock = threading.Lock()
        self._next_step = 0
        self._warned: set[str] = set()
        self._finished = False
        self.exit_timeout = exit_timeout
        # Progress (hang and straggler detection): reported by the ranks of a Cairn job only.
        replica = os.environ.get("CAIRN_REPLICA", "")
        self._replica = int(replica) if replica.isdigit() and os.environ.get("CAIRN_WORKLOAD_ID") else None
        self._progress_step: int | None = None
        self._progress_time = 0.0
        if self._replica is not None:
            _stacks_on_signal()
        self.sender = Sender(resolve_run=self._resolve, batch_size=batch_size, flush_interval=flush_interval,
                             max_buffer=max_buffer)
        if params:
            self.log_params(params)
        self._sampler = None
        if system_metrics:
            from .system import SystemSampler

            self._sampler = SystemSampler(self, interval=system_interval)
            self._sampler.start()
        atexit.register(self._at_exit)

    def __repr__(self) -> str:
        """What `print(cairn.init(...))` shows: which run, where to see it, whether it is still open."""
        state = "finished" if self._finished else "running"
        name = f" {self.name!r}" if self.name else ""
        if self.id is None:  # created by the sender thread on its first batch
            return f"<cairn.Run{name} (not created yet) project={self.project!r} {state} at {self.url}>"
        where = f"{self.url}/projects/{self.project}/compare?runs={self.id}"
        return f"<cairn.Run {self.id}{name} project={self.project!r} {state}: {where}>"

    # ---- where the points go (called in the sender thread) ----

    def _runs_url(self) -> str:
        return f"{self.url}/api/v1/projects/{self.project}/runs/"

    def _resolve(self, session) -> tuple[str, dict[str, str]]:
        if self.id is None or not self._run_token:
            if not self._api_token:
                raise _Fatal("no run token (CAIRN_RUN_TOKEN) and no API token to create a run with")
            response = session.post(self._runs_url(), json={"name": self.name or "", "client_id": self._client_id},
                                    headers={"Authorization": f"Bearer {self._api_token}"}, timeout=(3.0, 30.0))
            if response.status_code in (400, 401, 403, 404):
                raise _Fatal(f"cannot create the run (HTTP {response.status_code}: {_detail(response)})")
            if response.status_code >= 300:
                raise RuntimeError(f"HTTP {response.status_code}: {_detail(response)}")
            data = response.json()
            self.id, self._run_token = data["id"], data["run_token"]
        return (f"{self._runs_url()}{self.id}/batches/", {"Authorization": f"Bearer {self._run_token}"})

    # ---- the training script's calls: never raise, never block ----

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(message)

    def log(self, data: Mapping[str, Any], step: int | None = None) -> None:
        """Log metric values at `step` (default: one more than the previous step)."""
        try:
            now = time.time()
            with self._lock:
                if step is None:
                    step = self._next_step
                elif isinstance(step, bool) or not isinstance(step, int) or step < 0:
                    self._warn_once("step", f"cairn: step must be an integer >= 0, not {step!r}; ignored this call")
                    return
                self._next_step = max(self._next_step, step + 1)
            self._note_progress(step, now)
            points = []
            for key, value in data.items():
                if not isinstance(key, str) or not KEY_PATTERN.match(key):
                    self._warn_once(f"key:{key!r}", f"cairn: invalid metric key {key!r}; not logged")
                    continue
                number = _number(value)
                if number is None or not math.isfinite(number):
                    self._warn_once(f"value:{key}", f"cairn: {key}={value!r} is not a finite number; not logged")
                    continue
                points.append((key, step, number, now))
            if points:
                self.sender.add_points(points)
        except Exception as exc:  # noqa: BLE001 - logging must never break training
            self._warn_once("log", f"cairn: log() failed: {exc}")

    def _note_progress(self, step: int, now: float, seconds: float | None = None) -> None:
        """A step beyond the last one seen: report it with its duration (`seconds`, else the wall time
        since the previous step, per step when several passed)."""
        if self._replica is None:
            return
        previous = self._progress_step
        if previous is not None and step <= previous:
            return
        steps = []
        if seconds is not None:
            steps.append((step, seconds))
        elif previous is not None:
            steps.append((step, max(now - self._progress_time, 0.0) / (step - previous)))
        self._progress_step, self._progress_time = step, now
        self.sender.add_progress(self._replica, step, steps)

    def progress(self, step: int, seconds: float | None = None) -> None:
        """Say that training reached `step` (cheap: call it every step). `seconds`: the time this
        rank spent on the step's own work, without waiting in collectives; in synchronous data
        parallel training every rank's wall time per step is the same (the all-reduce waits for the
        slowest), so straggler detection needs this. Default: the wall time since the last step."""
        try:
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                return
            if seconds is not None and (not isinstance(seconds, int | float) or not math.isfinite(seconds)
                                        or seconds < 0):
                seconds = None
            with self._lock:
                self._next_step = max(self._next_step, step + 1)
                self._note_progress(step, time.time(), None if seconds is None else float(seconds))
        except Exception as exc:  # noqa: BLE001
            self._warn_once("progress", f"cairn: progress() failed: {exc}")

    def log_params(self, params: Mapping[str, Any]) -> None:
        try:
            clean = {}
            for key, value in params.items():
                if not isinstance(key, str) or not KEY_PATTERN.match(key):
                    self._warn_once(f"param:{key!r}", f"cairn: invalid param key {key!r}; not logged")
                    continue
                if isinstance(value, float) and not math.isfinite(value):
                    value = str(value)
                elif not (value is None or isinstance(value, str | int | float | bool)):
                    value = str(value)
                clean[key] = value
            if clean:
                self.sender.add_params(clean)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("params", f"cairn: log_params() failed: {exc}")

    def flush(self, timeout: float = 30.0) -> bool:
        return self.sender.flush(timeout)

    def finish(self, status: str = "finished", timeout: float = 30.0) -> bool:
        """Send what is buffered (waiting at most `timeout` seconds), then mark the run finished."""
        if self._finished:
            return True
        self._finished = True
        try:
            if self._sampler is not None:
                self._sampler.stop()
            if self._replica is not None and self._progress_step is not None:
                self.sender.add_progress(self._replica, self._progress_step, [], done=True)
            deadline = time.monotonic() + timeout
            ok = self.sender.close(timeout)
            target = self.sender.target()
            if not ok:
                logger.warning("cairn: %d points could not be sent before finish()", self.sender.pending())
            if target is None:
                return False
            if self._replica:  # rank > 0 of a job: the run is the job's; rank 0 (or Cairn) ends it,
                return ok      # or rank 0's last points, still on their way, would be refused
            return self._post_finish(target, status, deadline) and ok
        except Exception as exc:  # noqa: BLE001
            logger.warning("cairn: finish() failed: %s", exc)
            return False

    def _post_finish(self, target, status: str, deadline: float) -> bool:
        import requests

        url = target[0].removesuffix("batches/") + "finish/"
        delay = 0.2
        while True:
            try:
                response = requests.post(url, json={"status": status}, headers=target[1], timeout=(3.0, 10.0))
                if response.status_code < 300 or response.status_code == 409:
                    return True
                if response.status_code not in (429, 500, 502, 503, 504):
                    logger.warning("cairn: could not finish the run: HTTP %s", response.status_code)
                    return False
            except requests.RequestException:
                pass
            if time.monotonic() + delay > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _at_exit(self) -> None:
        if not self._finished:
            self.finish(timeout=self.exit_timeout)


def _stacks_on_signal() -> None:
    """Inside a Cairn job: SIGUSR2 prints every thread's Python stack to stderr (the replica's log).
    Cairn sends it to diagnose a hung rank when py-spy cannot attach (docs/training.md)."""
    import faulthandler
    import signal
    import sys

    try:
        if os.environ.get("CAIRN_STACKS_ON_SIGUSR2", "1") != "0" and threading.current_thread() is threading.main_thread():
            faulthandler.register(signal.SIGUSR2, file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):
        pass


def run_from_env(environ: Mapping[str, str] | None = None, **overrides: Any) -> Run:
    """A Run configured from the variables the backends inject, or from explicit arguments.

    In a job: CAIRN_API_URL, CAIRN_PROJECT, CAIRN_RUN_ID, CAIRN_RUN_TOKEN. Standalone: url=,
    project= and token= (an API token with write rights), or CAIRN_URL / CAIRN_TOKEN /
    CAIRN_PROJECT, or the CLI's config file."""
    environ = os.environ if environ is None else environ
    url = overrides.pop("url", None) or environ.get("CAIRN_API_URL") or environ.get("CAIRN_URL")
    project = overrides.pop("project", None) or environ.get("CAIRN_PROJECT")
    token = overrides.pop("token", None) or environ.get("CAIRN_TOKEN")
    run_id = overrides.pop("run_id", None) or environ.get("CAIRN_RUN_ID")
    run_token = overrides.pop("run_token", None) or environ.get("CAIRN_RUN_TOKEN")
    if not (url and project) or not (token or run_token):
        try:
            from cairn import config

            settings = config.load(environ)
            url, project, token = url or settings.url, project or settings.project, token or settings.token
        except Exception:  # noqa: BLE001
            pass
    if not url or not project:
        raise ValueError("cairn.init(): no server URL or project (set url= and project=, or run inside a Cairn job)")
    if "CAIRN_FLUSH_TIMEOUT" in environ:
        overrides.setdefault("exit_timeout", float(environ["CAIRN_FLUSH_TIMEOUT"]))
    from cairn.client import normalize_url

    return Run(url=normalize_url(url), project=project, run_id=int(run_id) if run_id else None, run_token=run_token,
               api_token=token, **overrides)
