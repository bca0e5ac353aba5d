"""The local backend: every replica is a real OS process on this machine.

Each replica runs under `shim.py`, detached in a session of its own, so it survives a crash of
the Cairn process that started it (and is reaped by init, not left a zombie under a worker).
Replicas run sandboxed where the host allows it (sandbox.py: bubblewrap, an unprivileged run
user, a memory rlimit). Processes are identified by pid *and* start time
(psutil), so a pid the kernel has handed to some other process is never taken for ours. The
shim records the exit code in a file, so an exit that happened while Cairn was down is known.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import signal as signals
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
from django.conf import settings

from apps.backends.base import EXITED, LOST, RUNNING, Backend, LaunchError, ReplicaState
from apps.backends.launch_env import attempt_env
from apps.clusters.models import Node
from apps.clusters.workdir import WorkingDirError, resolve_working_dir
from apps.workloads.kinds import kind_spec

from . import bridge, sandbox
from . import env as replica_env_lib
from .logs import FileLogReader, read_log
from .paths import (
    attempt_dir,
    home_dir,
    replica_exit_path,
    replica_log_path,
    replica_record_path,
    work_dir,
    workload_dir,
)

if TYPE_CHECKING:
    from apps.workloads.models import Workload

logger = logging.getLogger(__name__)

SHIM = str(Path(__file__).resolve().with_name("shim.py"))
_CREATE_TIME_TOLERANCE = 0.05  # seconds; psutil start times of one process agree far closer
_SHIM_START_TIMEOUT = 30.0  # seconds for the shim to detach and report its pid


# -- process identity --------------------------------------------------------------------------

def process_identity() -> dict:
    """Who this Cairn process is, in a form another process can check is still alive."""
    me = psutil.Process()
    return {"pid": me.pid, "create_time": me.create_time(), "host": socket.gethostname()}


def find_process(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The live (non-zombie) process with this pid *and* start time, or None."""
    if not pid or create_time is None:
        return None
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > _CREATE_TIME_TOLERANCE:
            return None  # the pid was reused by someone else
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def identity_alive(identity: dict | None) -> bool:
    if not identity:
        return False
    if identity.get("host") not in (None, socket.gethostname()):
        return False
    return find_process(identity.get("pid"), identity.get("create_time")) is not None


def free_port(taken: set[int] | None = None) -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now (and not in `taken`)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if not taken or port not in taken:
            if taken is not None:
                taken.add(port)
            return port
    raise LaunchError("No free TCP port on 127.0.0.1.")


def _signal_replica(record: dict, sig: int) -> bool:
    """SIGTERM goes to the shim (which forwards it); SIGKILL to the replica's whole process group."""
    proc = find_process(record.get("pid"), record.get("create_time"))
    if proc is None:
        return False
    try:
        if sig == signals.SIGKILL and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_stragglers(*, workload_id: int, attempt: int, replica: int, pgid: int) -> int:
    """Kill what is left of a replica whose shim vanished: processes of its group tagged as it."""
    tags = {"CAIRN_WORKLOAD_ID": str(workload_id), "CAIRN_ATTEMPT": str(attempt), "CAIRN_REPLICA": str(replica)}
    killed = 0
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or os.getpgid(proc.pid) != pgid:
                continue
            environ = proc.environ()
            if all(environ.get(k) == v for k, v in tags.items()):
                proc.kill()
                killed += 1
        except (psutil.Error, OSError):
            continue
    return killed


def _read_json(path: Path) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class LocalBackend(Backend):
    name = "local"

    # -- launch ----------------------------------------------------------------------------------

    def launch(self, workload: Workload, *, attempt: int) -> dict:
        wid = workload.pk
        directory = attempt_dir(wid, attempt)
        directory.mkdir(parents=True, exist_ok=True)
        self._kill_leftovers(wid, attempt)

        spec = workload.spec or {}
        iso = sandbox.isolation()
        cwd = self._working_dir(workload)
        home = home_dir(wid)
        data_dir = Path(settings.CAIRN_DATA_DIR)
        sandbox.prepare_dirs(
            iso, writable=[work_dir(wid), home], traverse=[data_dir, data_dir / "workloads", workload_dir(wid)],
            data_dir=data_dir,
        )
        os.chmod(directory, 0o700)  # logs, launch records and exit files are Cairn's alone
        problem = sandbox.unreachable_python(iso)
        if problem:
            raise LaunchError(problem)
        ports: set[int] = set()
        master_port = free_port(ports)
        kind = kind_spec(workload.kind)
        token = secrets.token_urlsafe(24) if kind.access_token else None
        node_gpus = self._node_gpu_count(workload)
        base_env = replica_env_lib.inherited_env()
        base_env["HOME"] = str(home)
        if iso.user:
            base_env["USER"] = base_env["LOGNAME"] = iso.user
        if iso.level != sandbox.NONE:
            base_env["TMPDIR"] = "/tmp"  # private in the sandbox; Cairn's own TMPDIR may be out of reach
        runtime: dict = {
            "backend": self.name,
            "attempt": attempt,
            "master_port": master_port,
            "replicas": [],
            "alive": True,
            "isolation": iso.level,
        }
        endpoints = []
        # From the apps above (launch_env.py): tracking's run of this attempt and a write-only token.
        run_env = attempt_env(workload=workload, attempt=attempt)
        try:
            for replica in range(workload.replicas):
                port = free_port(ports) if kind.serves_port else None
                placement = self._placement(workload, replica)
                reserved = replica_env_lib.reserved_env(
                    workload_id=wid, workload_name=workload.name, kind=workload.kind,
                    project=workload.project.slug, api_url=settings.CAIRN["PUBLIC_URL"], attempt=attempt,
                    replica=replica, replicas=workload.replicas, master_port=master_port,
                    gpus=replica_env_lib.replica_gpus(
                        replica=replica, gpu_milli=workload.gpu_milli, placement=placement, node_gpu_count=node_gpus
                    ),
                    port=port,
                )
                reserved.update(run_env)
                env, ignored = replica_env_lib.replica_env(base=base_env, user=spec.get("env"), reserved=reserved)
                if ignored:
                    runtime["ignored_env"] = ignored
                if token:
                    env["JUPYTER_TOKEN"] = token  # never on the command line, where any process can read it
                command = self._command(workload, env=env, port=port, cwd=cwd, iso=iso)
                sandboxed = iso.level in (sandbox.BWRAP_ROOT, sandbox.BWRAP)
                writable, inner, serve_socket = [work_dir(wid), home], command, None
                if kind.behind_gateway and sandboxed:
                    # No network of its own: reached only through the bridge's unix socket (gateway).
                    serve_socket = bridge.socket_path(directory, replica)
                    bridge.prepare_socket_dir(serve_socket.parent, uid=iso.uid, gid=iso.gid)
                    writable.append(serve_socket.parent)
                    inner = bridge.launcher_argv(sys.executable, serve_socket, port, command)
                argv = sandbox.wrap(
                    iso, command=inner, cwd=cwd, writable=writable,
                    shared=self._allowed_paths(workload), hidden=[data_dir], network=serve_socket is None,
                )
                record = self._spawn(
                    workload_id=wid, attempt=attempt, replica=replica, argv=argv, command=command, env=env, cwd=cwd,
                    sandboxed=sandboxed, memory=sandbox.memory_limit(workload.memory_mb * 1024 * 1024),
                )
                if serve_socket is not None:
                    record["socket"] = str(serve_socket)  # backend-private: the gateway's way in
                elif port is not None:
                    record["port"] = port
                    endpoints.append(f"http://127.0.0.1:{port}/")
                runtime["replicas"].append(record)
        except (OSError, LaunchError) as exc:
            for record in runtime["replicas"]:
                _signal_replica(record, signals.SIGKILL)
            raise LaunchError(str(exc)) from exc

        if kind.behind_gateway:
            # Sandboxed replicas have no TCP endpoint: they are reached through Cairn's gateway.
            runtime.update(url=endpoints[0] if endpoints else kind.gateway_url(workload), endpoints=endpoints)
        elif kind.serves_port:
            runtime["url"] = endpoints[0] if endpoints else ""
        if kind.access_token:
            runtime["token"] = token
        return runtime

    def _working_dir(self, workload: Workload) -> Path:
        """The spec's working_dir checked again on disk (symlinks resolved): inside the workload's own
        folder, or inside a directory the pool allows. Default: the work folder, kept across attempts
        so that checkpoints written there survive restarts."""
        requested = (workload.spec or {}).get("working_dir")
        try:
            return resolve_working_dir(
                requested if isinstance(requested, str) or requested is None else str(requested),
                work_dir=work_dir(workload.pk), allowed_roots=workload.pool.allowed_paths or [],
                denied_roots=[str(settings.CAIRN_DATA_DIR)],
            )
        except WorkingDirError as exc:
            raise LaunchError(f"Working directory refused: {exc}") from None

    @staticmethod
    def _allowed_paths(workload: Workload) -> list[str]:
        """Directories an admin allows on the workload's pool (mounted into the sandbox)."""
        return [p for p in workload.pool.allowed_paths or [] if isinstance(p, str) and os.path.isdir(p)]

    @staticmethod
    def _placement(workload: Workload, replica: int) -> dict | None:
        for entry in workload.placement or []:
            if isinstance(entry, dict) and entry.get("replica") == replica:
                return entry
        return None

    @staticmethod
    def _node_gpu_count(workload: Workload) -> int:
        if workload.gpu_milli <= 0:
            return 0

        names = {e.get("node") for e in workload.placement or [] if isinstance(e, dict)}
        counts = Node.objects.filter(cluster_id=workload.pool.cluster_id, name__in=names).values_list("gpu_count", flat=True)
        return max(counts, default=0)

    def _command(self, workload: Workload, *, env: dict, port: int | None, cwd: Path, iso: sandbox.Isolation) -> list[str]:
        spec = workload.spec or {}
        local_command = kind_spec(workload.kind).local_command
        if local_command is not None:  # the kind decides the command (a notebook: JupyterLab)
            return local_command(workload, port=port, cwd=cwd, as_root=os.geteuid() == 0 and iso.uid is None)
        command = spec.get("command")
        if isinstance(command, str) and command.strip():
            return ["/bin/sh", "-c", command]  # a command line: let the shell expand $PORT and friends
        if not command or not isinstance(command, list):
            raise LaunchError(f"The {workload.kind} spec has no command to run.")
        return replica_env_lib.expand_command(command, env)

    def _spawn(
        self, *, workload_id: int, attempt: int, replica: int, argv: list[str], command: list[str], env: dict,
        cwd: Path, sandboxed: bool, memory: int | None,
    ) -> dict:
        exit_path = replica_exit_path(workload_id, attempt, replica)
        exit_path.unlink(missing_ok=True)
        shim = [sys.executable, "-I", "-S", SHIM]
        if sandboxed:
            shim.append("--sandboxed")
        if memory:
            shim += ["--memory", str(memory)]
        read_end, write_end = os.pipe()
        try:
            with open(replica_log_path(workload_id, attempt, replica), "ab") as log:
                os.chmod(log.fileno(), 0o600)
                # The shim detaches (fork) and reports the pid of the process that stays: the one we
                # start exits at once and is reaped right here, so no zombie is left under a worker.
                proc = subprocess.Popen(
                    [*shim, "--notify-fd", str(write_end), str(exit_path), "--", *argv],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                    start_new_session=True, close_fds=True, pass_fds=(write_end,),
                )
            os.close(write_end)
            write_end = None
            with os.fdopen(read_end, "rb") as pipe:
                read_end = None
                reported = pipe.read()
            proc.wait(timeout=_SHIM_START_TIMEOUT)
        finally:
            for fd in (read_end, write_end):
                if fd is not None:
                    os.close(fd)
        try:
            pid = int(reported)
        except ValueError:
            raise LaunchError(f"The replica supervisor did not start (exit code {proc.returncode}).") from None
        try:
            create_time = psutil.Process(pid).create_time()
        except psutil.Error:  # already gone: it will be seen as exited or lost
            create_time = 0.0
        record = {"replica": replica, "pid": pid, "create_time": create_time}
        _write_json(replica_record_path(workload_id, attempt, replica), record)
        logger.info("local backend: workload %s attempt %s replica %s started as pid %s%s: %s",
                    workload_id, attempt, replica, pid, " (sandboxed)" if sandboxed else "", command)
        return record

    def _kill_leftovers(self, workload_id: int, attempt: int) -> None:
        """Kill replicas of this attempt launched before, whose bookkeeping never got committed."""
        for path in attempt_dir(workload_id, attempt).glob("replica-*.json"):
            record = _read_json(path)
            if record and _signal_replica(record, signals.SIGKILL):
                logger.warning("local backend: killed leftover %s (pid %s)", path, record.get("pid"))

    # -- observe and signal --------------------------------------------------------------------------

    def observe(self, workload: Workload) -> list[ReplicaState]:
        runtime = workload.runtime or {}
        attempt = runtime.get("attempt")
        return [self._observe_replica(workload.pk, attempt, record) for record in runtime.get("replicas", [])]

    def _observe_replica(self, workload_id: int, attempt: int, record: dict) -> ReplicaState:
        replica = record["replica"]
        # Alive first, then the exit file: the other order could call a replica that exits in
        # between "lost".
        if find_process(record.get("pid"), record.get("create_time")) is not None:
            return ReplicaState(replica=replica, phase=RUNNING, pid=record.get("pid"))
        result = _read_json(replica_exit_path(workload_id, attempt, replica))
        if result is not None:
            return ReplicaState(
                replica=replica, phase=EXITED, exit_code=int(result.get("exit_code", 1)),
                signal=result.get("signal"), finished_at=result.get("finished_at"), pid=record.get("pid"),
            )
        if record.get("pid"):
            _kill_stragglers(workload_id=workload_id, attempt=attempt, replica=replica, pgid=record["pid"])
        return ReplicaState(replica=replica, phase=LOST, pid=record.get("pid"))

    def signal(self, workload: Workload, *, force: bool = False) -> int:
        sig = signals.SIGKILL if force else signals.SIGTERM
        return sum(_signal_replica(record, sig) for record in (workload.runtime or {}).get("replicas", []))

    # -- logs ----------------------------------------------------------------------------------------

    def log_path(self, workload: Workload, *, replica: int, attempt: int) -> Path:
        return replica_log_path(workload.pk, attempt, replica)

    def logs(self, workload: Workload, *, replica: int, attempt: int, tail: int | None = None) -> str:
        return read_log(self.log_path(workload, replica=replica, attempt=attempt), tail=tail)

    def log_reader(self, workload: Workload, *, replica: int, attempt: int, tail: int | None) -> FileLogReader:
        return FileLogReader(workload_id=workload.pk, replica=replica, attempt=attempt, tail_lines=tail)
