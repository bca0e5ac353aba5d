"""Checkpoints Cairn knows about: `cairn.checkpoint.save()` / `cairn.checkpoint.latest()`.

    import cairn.checkpoint as ckpt
    last = ckpt.latest()                          # None on a first start
    state = last.load() if last else None         # what save() was given
    ...
    ckpt.save({"model": model.state_dict(), "step": step}, step=step)

Where: `CAIRN_CHECKPOINT_DIR` (the backends set it: the workload's own folder on the local
backend, the checkpoint volume on Kubernetes; kept across attempts), or `directory=`.

Each checkpoint is a folder `step-<step>/` holding `state.<pt|pkl|bin>` and `manifest.json`
(step, time, size, sha256). A save writes into a hidden temporary folder, fsyncs the file and the
manifest, then renames the folder into place and fsyncs its parent: a save cut short (crash,
SIGKILL, full disk) leaves only a temporary folder, which `latest()` never returns and the next
save clears away. `keep` (default 3) is how many complete checkpoints stay.

Two-stage (`two_stage=True`, or CAIRN_CHECKPOINT_TWO_STAGE=1): the state is written to a fast
local tier (`CAIRN_CHECKPOINT_FAST_DIR`, default a folder in /dev/shm) and `save()` returns; a
background thread then copies it to the persistent folder the same atomic way. `wait()` blocks
until every flush is done (also done at exit). `latest()` only looks at the persistent folder.

Every saved checkpoint is reported to Cairn (step, size, total save time, the time training was
blocked) with the run's write-only token, from a background thread: it shows on the workload's
timeline. Reporting never raises and never blocks training.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import pickle
import queue
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("cairn.checkpoint")

__all__ = ["Checkpoint", "directory", "latest", "list_checkpoints", "save", "wait"]

MANIFEST = "manifest.json"
_NAME = re.compile(r"^step-(\d{1,19})$")
_TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint on disk."""

    path: Path  # the step-<n> folder
    step: int
    time: float  # when it was written (epoch seconds)
    size: int  # bytes of the state file
    sha256: str
    file: str  # the state file's name inside `path`

    @property
    def state_path(self) -> Path:
        return self.path / self.file

    def load(self, **torch_load_kwargs: Any) -> Any:
        """What `save()` was given: torch.load for .pt, pickle for .pkl, the bytes for .bin."""
        if self.file.endswith(".pt"):
            import torch

            torch_load_kwargs.setdefault("weights_only", False)
            return torch.load(self.state_path, **torch_load_kwargs)
        if self.file.endswith(".pkl"):
            with open(self.state_path, "rb") as f:
                return pickle.load(f)  # noqa: S301 - the job's own checkpoint
        return self.state_path.read_bytes()

    def verify(self) -> bool:
        """True when the state file's size and sha256 are those of the manifest."""
        try:
            return self.state_path.stat().st_size == self.size and _sha256(self.state_path) == self.sha256
        except OSError:
            return False


def directory(path: str | os.PathLike | None = None) -> Path:
    """The persistent checkpoint folder: `path`, else CAIRN_CHECKPOINT_DIR, else ./checkpoints."""
    chosen = path or os.environ.get("CAIRN_CHECKPOINT_DIR") or "checkpoints"
    return Path(chosen)


def _fast_directory(persistent: Path) -> Path:
    configured = os.environ.get("CAIRN_CHECKPOINT_FAST_DIR")
    if configured:
        return Path(configured)
    base = Path("/dev/shm") if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else persistent.parent
    tag = os.environ.get("CAIRN_WORKLOAD_ID") or hashlib.sha1(str(persistent.resolve()).encode()).hexdigest()[:12]
    return base / f"cairn-checkpoints-{tag}-{os.getuid()}"


# -- reading -------------------------------------------------------------------------------------

def _read_manifest(folder: Path) -> Checkpoint | None:
    match = _NAME.match(folder.name)
    if not match:
        return None
    try:
        with open(folder / MANIFEST) as f:
            data = json.load(f)
        step, size, file = int(data["step"]), int(data["size"]), str(data["file"])
        checkpoint = Checkpoint(path=folder, step=step, time=float(data["time"]), size=size,
                                sha256=str(data["sha256"]), file=file)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if step != int(match.group(1)) or "/" in file:
        return None
    try:
        if (folder / file).stat().st_size != size:
            return None
    except OSError:
        return None
    return checkpoint


def list_checkpoints(path: str | os.PathLike | None = None) -> list[Checkpoint]:
    """Every complete checkpoint in the folder, oldest step first."""
    root = directory(path)
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    found = [c for c in (_read_manifest(e) for e in entries if e.is_dir()) if c is not None]
    return sorted(found, key=lambda c: c.step)


def latest(path: str | os.PathLike | None = None, *, verify: bool = False) -> Checkpoint | None:
    """The complete checkpoint with the highest step, or None. A checkpoint whose save was cut
    short is never returned; with `verify=True` the checksum is checked too (older ones are
    tried when the newest does not match)."""
    for checkpoint in reversed(list_checkpoints(path)):
        if not verify or checkpoint.verify():
            return checkpoint
    return None


# -- writing -------------------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _serialize(state: Any, target_dir: Path) -> str:
    """Write `state` into target_dir; returns the file name."""
    if isinstance(state, bytes | bytearray | memoryview):
        name = "state.bin"
        with open(target_dir / name, "wb") as f:
            f.write(state)
            f.flush()
            os.fsync(f.fileno())
        return name
    try:
        import torch
    except ImportError:
        torch = None
    name = "state.pt" if torch is not None else "state.pkl"
    with open(target_dir / name, "wb") as f:
        if torch is not None:
            torch.save(state, f)
        else:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    return name


def _clear_temporaries(root: Path, *, older_than: float = 0.0) -> None:
    now = time.time()
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(_TMP_PREFIX):
            try:
                if now - entry.stat().st_mtime >= older_than:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                continue


def _commit(tmp: Path, root: Path, step: int) -> Path:
    """Rename the finished temporary folder to step-<n> (replacing one of the same step)."""
    final = root / f"step-{step:08d}" if step < 10**8 else root / f"step-{step}"
    if final.exists():
        trash = root / f"{_TMP_PREFIX}old-{uuid.uuid4().hex}"
        os.rename(final, trash)
        os.rename(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, final)
    _fsync_dir(root)
    return final


def _write_manifest(folder: Path, *, step: int, file: str, extra: Mapping[str, Any] | None) -> dict:
    state_path = folder / file
    manifest = {
        "step": step, "time": time.time(), "file": file, "size": state_path.stat().st_size,
        "sha256": _sha256(state_path), "host": socket.gethostname(),
        "attempt": os.environ.get("CAIRN_ATTEMPT"), "replica": os.environ.get("CAIRN_REPLICA"),
    }
    if extra:
        manifest["extra"] = dict(extra)
    with open(folder / MANIFEST, "w") as f:
        json.dump(manifest, f)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(folder)
    return manifest


def _prune(root: Path, keep: int) -> None:
    if keep <= 0:
        return
    complete = list_checkpoints(root)
    for old in complete[:-keep]:
        trash = root / f"{_TMP_PREFIX}prune-{uuid.uuid4().hex}"
        try:
            os.rename(old.path, trash)  # out of sight first: never a half-deleted step-<n>
        except OSError:
            continue
        shutil.rmtree(trash, ignore_errors=True)


def _copy_atomic(source: Path, root: Path, step: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f"{_TMP_PREFIX}{step}-{uuid.uuid4().hex}"
    tmp.mkdir()
    for child in sorted(source.iterdir(), key=lambda p: p.name == MANIFEST):  # the manifest last
        with open(child, "rb") as src, open(tmp / child.name, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
    _fsync_dir(tmp)
    return _commit(tmp, root, step)


class _Flusher:
    """The background thread of two-stage saves: fast tier -> persistent folder, in order."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name="cairn-checkpoint-flush", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                if job is None:
                    return
                job()
            except Exception as exc:  # noqa: BLE001 - a failed flush must not kill training
                self.errors.append(str(exc))
                logger.warning("cairn: checkpoint flush failed: %s", exc)
            finally:
                self.jobs.task_done()


_flusher: _Flusher | None = None
_flusher_lock = threading.Lock()


def _background() -> _Flusher:
    global _flusher
    with _flusher_lock:
        if _flusher is None:
            _flusher = _Flusher()
        return _flusher


def wait(timeout: float | None = None) -> bool:
    """Block until every two-stage flush (and checkpoint report) so far is done; False on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    flusher = _flusher
    if flusher is not None:
        while flusher.jobs.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)
    return _reporter_wait(None if deadline is None else max(0.0, deadline - time.monotonic()))


def save(
    state: Any, step: int, *, path: str | os.PathLike | None = None, keep: int | None = None,
    two_stage: bool | None = None, extra: Mapping[str, Any] | None = None, report: bool = True,
) -> Checkpoint | None:
    """Save `state` (a torch object: torch.save; bytes: as they are; anything else: pickle) as the
    checkpoint of `step`. Returns the persisted Checkpoint, or None in two-stage mode (persisted
    in the background; `wait()` to be sure)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an integer >= 0, not {step!r}")
    root = directory(path)
    keep = int(os.environ.get("CAIRN_CHECKPOINT_KEEP", "3")) if keep is None else keep
    if two_stage is None:
        two_stage = os.environ.get("CAIRN_CHECKPOINT_TWO_STAGE", "") not in ("", "0", "false")
    started = time.monotonic()
    stage_root = _fast_directory(root) if two_stage else root
    stage_root.mkdir(parents=True, exist_ok=True)
    _clear_temporaries(stage_root, older_than=3600.0 if two_stage else 0.0)
    tmp = stage_root / f"{_TMP_PREFIX}{step}-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        file = _serialize(state, tmp)
        manifest = _write_manifest(tmp, step=step, file=file, extra=extra)
        staged = _commit(tmp, stage_root, step)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    blocking = time.monotonic() - started
    if not two_stage:
        _prune(root, keep)
        checkpoint = _read_manifest(staged)
        if report:
            _report(step=step, size=manifest["size"], save_seconds=blocking, blocking_seconds=blocking,
                    sha256=manifest["sha256"], name=staged.name, two_stage=False)
        return checkpoint

    def flush() -> None:
        final = _copy_atomic(staged, root, step)
        shutil.rmtree(staged, ignore_errors=True)
        _prune(root, keep)
        if report:
            _report(step=step, size=manifest["size"], save_seconds=time.monotonic() - started,
                    blocking_seconds=blocking, sha256=manifest["sha256"], name=final.name, two_stage=True)

    _background().jobs.put(flush)
    return None


atexit.register(lambda: wait(timeout=float(os.environ.get("CAIRN_CHECKPOINT_EXIT_TIMEOUT", "300"))))


# -- reporting to Cairn -----------------------------------------------------------------------------

_reports: queue.Queue = queue.Queue()
_reporter: threading.Thread | None = None


def _target() -> tuple[str, dict[str, str]] | None:
    """The run's checkpoints URL and headers: the current tracked run's, else the job's env."""
    try:
        from cairn.tracking import current_run

        run = current_run()
    except Exception:  # noqa: BLE001
        run = None
    if run is not None and run.id is not None and getattr(run, "_run_token", None):
        return (f"{run.url}/api/v1/projects/{run.project}/runs/{run.id}/checkpoints/",
                {"Authorization": f"Bearer {run._run_token}"})
    url, project = os.environ.get("CAIRN_API_URL"), os.environ.get("CAIRN_PROJECT")
    run_id, token = os.environ.get("CAIRN_RUN_ID"), os.environ.get("CAIRN_RUN_TOKEN")
    if not (url and project and run_id and token):
        return None
    return (f"{url.rstrip('/')}/api/v1/projects/{project}/runs/{run_id}/checkpoints/",
            {"Authorization": f"Bearer {token}"})


def _report(**fields: Any) -> None:
    global _reporter
    target = _target()
    if target is None:
        return
    replica = os.environ.get("CAIRN_REPLICA")
    body = {"step": fields["step"], "size_bytes": fields["size"], "save_seconds": round(fields["save_seconds"], 6),
            "blocking_seconds": round(fields["blocking_seconds"], 6), "sha256": fields["sha256"],
            "name": fields["name"], "two_stage": fields["two_stage"],
            "replica": int(replica) if replica and replica.isdigit() else 0}
    _reports.put((target, body))
    with _flusher_lock:
        if _reporter is None or not _reporter.is_alive():
            _reporter = threading.Thread(target=_report_loop, name="cairn-checkpoint-report", daemon=True)
            _reporter.start()


def _report_loop() -> None:
    from .tracking.transport import Session

    session = Session()
    while True:
        target, body = _reports.get()
        try:
            delay = 0.2
            for _ in range(6):
                try:
                    response = session.post(target[0], json=body, headers=target[1], timeout=(3.0, 10.0))
                except Exception:  # noqa: BLE001 - unreachable: retry a few times
                    response = None
                if response is not None and response.status_code < 500 and response.status_code != 429:
                    if response.status_code >= 300:
                        logger.warning("cairn: checkpoint report refused (HTTP %s)", response.status_code)
                    break
                time.sleep(delay)
                delay = min(delay * 2, 3.0)
        finally:
            _reports.task_done()


def _reporter_wait(timeout: float | None) -> bool:
    deadline = None if timeout is None else time.monotonic() + timeout
    while _reports.unfinished_tasks:
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
