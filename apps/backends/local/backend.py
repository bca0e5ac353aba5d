"""The local backend: every replica is a real OS process on this machine.

Each replica runs under `shim.py`, detached in a session of its own, so it survives a crash of
the Cairn process that started it (and is reaped by init, not left a zombie under a worker).
Replicas run sandboxed where the host allows it (sandbox.py: bubblewrap, an unprivileged run
user, a memory rlimit). Processes are identified by pid *and* start time
(psutil), so a pid the kernel has handed to some other process is never taken for ours. The
shim records the exit code in a file, so an exit that happened while Cairn was down is known.
"""
from __future__ import annotations

import copy
import ipaddress
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

from apps.backends import replica_env as replica_env_lib
from apps.backends.base import EXITED, LOST, RUNNING, Backend, LaunchError, ReplicaScaling, ReplicaState
from apps.backends.identity import find_process
from apps.backends.launch_env import attempt_env
from apps.backends.logfiles import FileLogReader, read_log
from apps.clusters import crypto
from apps.clusters.models import Node
from apps.clusters.workdir import WorkingDirError, resolve_working_dir
from apps.workloads.kinds import LaunchRefused, kind_spec

from . import bridge, limits, netns, sandbox, seccomp, stacks
from . import storage as local_storage
from .paths import (
    attempt_dir,
    checkpoint_dir,
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
_SHIM_START_TIMEOUT = 30.0  # seconds for the shim to detach and report its pid


# -- processes (identity: apps.backends.identity) ----------------------------------------------

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


def _host_listener(host: str, port: int) -> socket.socket:
    """Cairn's TCP listener on the host for a replica in a network of its own (bridge.py relays)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise LaunchError(f"Cannot listen on {host}:{port} for the replica: {exc}") from None
    return listener


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


def slot_of(record: dict) -> int:
    """The files of a replica (log, exit file, launch record, socket) are those of its slot: its
    number, unless it took over another replica's number (a rollout's surge replica replacing an
    old one, apps/deployments) and keeps the files it started with."""
    return int(record.get("slot", record["replica"]))


def _slot_for(runtime: dict, replica: int) -> int:
    """The slot of the replica numbered `replica` in the runtime (its own number if unknown)."""
    for record in runtime.get("replicas") or []:
        if isinstance(record, dict) and record.get("replica") == replica:
            return slot_of(record)
    return replica


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


class LocalBackend(Backend, ReplicaScaling):
    name = "local"

    # -- launch ----------------------------------------------------------------------------------

    def launch(self, workload: Workload, *, attempt: int, run_env: dict[str, str] | None = None) -> dict:
        """Start the replicas of `attempt`. Launching an attempt again (the first launch was
        interrupted: the dispatcher died) adopts its replicas that already started, found by
        their launch records or, if the record was never written, by their supervisor's command
        line, and starts only the missing ones with the same ports and environment."""
        wid = workload.pk
        directory = attempt_dir(wid, attempt)
        directory.mkdir(parents=True, exist_ok=True)
        kind = kind_spec(workload.kind)
        plan = self._plan(wid, attempt, replicas=workload.replicas, serves_port=kind.serves_port,
                          access_token=kind.access_token)
        master_port, token = plan["master_port"], plan["token"]
        context = self._attempt_context(workload, attempt=attempt, master_port=master_port, token=token,
                                        run_env=run_env)
        runtime: dict = {
            "backend": self.name,
            "attempt": attempt,
            "master_port": master_port,
            "replicas": [],
            "alive": True,
            "isolation": context["iso"].level,
        }
        try:
            for replica in range(workload.replicas):
                port = plan["ports"][replica] if kind.serves_port else None
                record = self._start_replica(workload, context, replica=replica, port=port, adopt=True)
                if record.pop("ignored_env", None):
                    runtime["ignored_env"] = context["ignored"]
                runtime["replicas"].append(record)
        except (OSError, LaunchError) as exc:
            for record in runtime["replicas"]:
                _signal_replica(record, signals.SIGKILL)
            raise LaunchError(str(exc)) from exc

        host = kind.local_host() if kind.local_host is not None else "127.0.0.1"
        endpoints = [f"http://{host}:{r['port']}/" for r in runtime["replicas"] if r.get("port")]
        if kind.behind_gateway:
            # Sandboxed replicas have no TCP endpoint: they are reached through Cairn's gateway.
            runtime.update(url=endpoints[0] if endpoints else kind.gateway_url(workload), endpoints=endpoints)
        elif kind.serves_port:
            runtime["url"] = endpoints[0] if endpoints else ""
        if kind.access_token:
            runtime["token"] = crypto.seal(token)  # encrypted at rest: the database is no place for it in plain text
        return runtime

    def launch_replica(self, workload: Workload, *, replica: int, spec: dict | None = None) -> dict:
        """Start (again) one replica of the workload's current attempt, next to the others that
        keep running (a deployment's replicas are independent: one that failed is restarted
        alone, and scaling adds or removes replicas). Returns its record for runtime["replicas"]."""
        runtime = workload.runtime or {}
        attempt = int(runtime.get("attempt") or workload.attempt)
        attempt_dir(workload.pk, attempt).mkdir(parents=True, exist_ok=True)
        if spec is not None:  # another revision's command, image, env or size (a rolling update, a canary)
            workload = copy.copy(workload)
            workload.spec = spec
            for key, value in (spec.get("resources") or {}).items():
                if key in ("gpu_milli", "cpu_milli", "memory_mb"):
                    setattr(workload, key, int(value))
        context = self._attempt_context(workload, attempt=attempt, master_port=int(runtime.get("master_port") or 0),
                                        token=crypto.unseal(runtime["token"]) if runtime.get("token") else None)
        ports = {int(r["port"]) for r in runtime.get("replicas", []) if isinstance(r, dict) and r.get("port")}
        port = free_port(ports) if kind_spec(workload.kind).serves_port else None
        # A live replica may hold this number's files: one that took it over keeps its own slot,
        # and the number it left is started in a fresh slot (never two processes on one log).
        live = [r for r in (*runtime.get("replicas", []), *runtime.get("draining", []))
                if isinstance(r, dict) and "replica" in r and self.replica_alive(r)]
        used = {slot_of(r) for r in live}
        slot = replica if replica not in used else max(used | {workload.replicas - 1}) + 1
        record = self._start_replica(workload, context, replica=replica, port=port, slot=slot)
        record.pop("ignored_env", None)
        return record

    def replica_alive(self, record: dict) -> bool:
        return find_process(record.get("pid"), record.get("create_time")) is not None

    def stop_replica(self, record: dict, *, force: bool = False) -> bool:
        """SIGTERM (or SIGKILL) one replica, e.g. a deployment scaled down."""
        return _signal_replica(record, signals.SIGKILL if force else signals.SIGTERM)

    def _attempt_context(self, workload: Workload, *, attempt: int, master_port: int, token: str | None,
                         run_env: dict[str, str] | None = None) -> dict:
        """What every replica of an attempt shares: isolation, working directory, base env."""
        wid = workload.pk
        iso = sandbox.isolation()
        cwd = self._working_dir(workload)
        home = home_dir(wid)
        data_dir = Path(settings.CAIRN_DATA_DIR)
        # Kept across attempts and writable: work/, home/ and, for jobs, the checkpoint folder.
        kept = [work_dir(wid), home, *([checkpoint_dir(wid)] if kind_spec(workload.kind).runs_to_completion else [])]
        sandbox.prepare_dirs(
            iso, writable=kept, traverse=[data_dir, data_dir / "workloads", workload_dir(wid)],
            data_dir=data_dir,
        )
        os.chmod(attempt_dir(wid, attempt), 0o700)  # logs, launch records and exit files are Cairn's alone
        problem = sandbox.unreachable_python(iso)
        if problem:
            raise LaunchError(problem)
        net, outbound = None, bool(getattr(workload.pool, "outbound_access", True)) and netns.network().outbound
        if iso.uid is not None and netns.network().available:  # root with a run user: see netns.py
            netns.sweep()
            try:
                net = netns.ensure(wid, attempt, outbound=outbound,
                                   run_uid=iso.uid, run_gid=iso.gid)
            except (netns.NetworkError, OSError, subprocess.SubprocessError) as exc:
                raise LaunchError(str(exc)) from exc
        base_env = replica_env_lib.inherited_env()
        base_env["HOME"] = str(home)
        if iso.user:
            base_env["USER"] = base_env["LOGNAME"] = iso.user
        if iso.level != sandbox.NONE:
            base_env["TMPDIR"] = "/tmp"  # private in the sandbox; Cairn's own TMPDIR may be out of reach
        return {
            "iso": iso, "net": net, "outbound": outbound, "cwd": cwd, "home": home, "kept": kept, "data_dir": data_dir, "attempt": attempt,
            "master_port": master_port, "token": token, "base_env": base_env, "node_gpus": self._node_gpu_count(workload),
            # From the apps above (launch_env.py): tracking's run of this attempt and a write-only token.
            "run_env": attempt_env(workload=workload, attempt=attempt) if run_env is None else run_env,
            # Volumes, datasets and a deployment's model (apps/storage): binds and their env.
            "storage": local_storage.mounts(workload, iso),
            "ignored": [],
        }

    def _start_replica(self, workload: Workload, context: dict, *, replica: int, port: int | None,
                       adopt: bool = False, slot: int | None = None) -> dict:
        """Start one replica; with `adopt`, one of this attempt that already started is taken
        over instead (a launch resumed after the dispatcher died). Its files are those of `slot`
        (default: its number; slot_of)."""
        wid, attempt, iso, cwd = workload.pk, context["attempt"], context["iso"], context["cwd"]
        slot = replica if slot is None else slot
        kind = kind_spec(workload.kind)
        spec = workload.spec or {}
        placement = self._placement(workload, replica)
        reserved = replica_env_lib.reserved_env(
            workload_id=wid, workload_name=workload.name, kind=workload.kind,
            project=workload.project.slug, api_url=settings.CAIRN["PUBLIC_URL"], attempt=attempt,
            replica=replica, replicas=workload.replicas, master_port=context["master_port"],
            gpus=replica_env_lib.replica_gpus(
                replica=replica, gpu_milli=workload.gpu_milli, placement=placement,
                node_gpu_count=context["node_gpus"],
            ),
            port=port,
        )
        reserved.update(context["run_env"])
        binds, storage_env = context["storage"]
        reserved.update(storage_env)
        if placement and placement.get("node"):
            reserved["CAIRN_NODE"] = str(placement["node"])  # which (simulated) node it runs on
        env, ignored = replica_env_lib.replica_env(base=context["base_env"], user=spec.get("env"), reserved=reserved)
        if ignored:
            context["ignored"] = ignored
        if context["token"]:  # never on the command line, where any process can read it
            env.update(kind.local_token_env(workload, context["token"]) if kind.local_token_env is not None
                       else {"JUPYTER_TOKEN": context["token"]})
        command = self._command(workload, env=env, port=port, cwd=cwd, iso=iso)
        sandboxed = iso.level in (sandbox.BWRAP_ROOT, sandbox.BWRAP)
        writable, inner, serve_socket, listener = list(context["kept"]), command, None, None
        if kind.behind_gateway and sandboxed:
            # No network of its own: reached only through the bridge's unix socket (gateway), which
            # Cairn binds in a folder of its own; the replica only gets the listening descriptor.
            serve_socket = bridge.socket_path(attempt_dir(wid, attempt), slot, start=secrets.token_hex(4))
            listener = bridge.listen(serve_socket)
            inner = bridge.launcher_argv(sys.executable, listener.fileno(), port, command)
        elif port is not None and context["net"] is not None:
            # In a network of its own the port is out of Cairn's reach: Cairn listens on it on the
            # host and the replica's bridge relays to 127.0.0.1:PORT inside (bridge.py).
            host = kind.local_host() if kind.local_host is not None else "127.0.0.1"
            listener = _host_listener(host, port)
            inside = "127.0.0.1"
            if not ipaddress.ip_address(host).is_loopback and not ipaddress.ip_address(host).is_unspecified:
                inside = netns.add_address(context["net"], host)  # the command binds there: give it that address
            inner = bridge.launcher_argv(sys.executable, listener.fileno(), f"{inside}:{port}", command)
        memory = sandbox.memory_limit(workload.memory_mb * 1024 * 1024)
        tmp_size, shm_size = limits.tmpfs_sizes(memory)
        seccomp_file = seccomp.filter_path() if sandboxed else None
        seccomp_fd = (next(fd for fd in range(seccomp.FD, seccomp.FD + 8) if listener is None or fd != listener.fileno())
                      if seccomp_file is not None else None)
        if context["net"] is not None and context["outbound"]:
            binds = [*binds, (netns.resolv_conf(), os.path.realpath("/etc/resolv.conf"), True)]
        argv = sandbox.wrap(
            iso, command=inner, cwd=cwd, writable=writable, tmp_size=tmp_size, shm_size=shm_size, seccomp_fd=seccomp_fd,
            shared=self._allowed_paths(workload), hidden=[context["data_dir"]], network=serve_socket is None or context["net"] is not None,
            binds=binds, readable=kind.local_mounts(workload) if kind.local_mounts is not None else (),
        )
        if context["net"] is not None:
            argv = netns.enter_argv(context["net"]) + argv  # the cache fill (below) stays on the host
        argv = local_storage.fill_prefix(workload, directory=attempt_dir(wid, attempt), replica=slot) + argv
        record = self._started_replica(wid, attempt, replica) if adopt else None
        if record is not None:
            logger.warning("local backend: workload %s attempt %s replica %s already started (pid %s): "
                           "adopted, not started again", wid, attempt, replica, record.get("pid"))
        else:
            record = self._spawn(
                workload_id=wid, attempt=attempt, replica=slot, argv=argv, command=command, env=env, cwd=cwd,
                sandboxed=sandboxed, memory=memory,
                # The workload's folders are measured by one replica's watchdog, not by each.
                watch=limits.shim_limits(memory=memory, disk_paths=[str(p) for p in context["kept"]] if replica == 0 else [],
                                          cgroup_name=f"cairn-{wid}-{attempt}-{slot}-{secrets.token_hex(3)}"),
                pass_fds=[(seccomp_fd, str(seccomp_file))] if seccomp_file is not None else [],
                keep_fds=(listener.fileno(),) if listener is not None else (),
            )
            if slot != replica:
                record.update(replica=replica, slot=slot)
        if listener is not None:
            listener.close()  # the replica holds it now (on an error above, garbage collection closes it)
        if serve_socket is not None:
            record["socket"] = str(serve_socket)  # backend-private: the gateway's way in
        elif port is not None:
            record["port"] = port
        if ignored:
            record["ignored_env"] = True
        return record

    def checkpoint_env(self, workload: Workload) -> dict[str, str]:
        return {"CAIRN_CHECKPOINT_DIR": str(checkpoint_dir(workload.pk))}

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
            try:
                return local_command(workload, port=port, cwd=cwd, as_root=os.geteuid() == 0 and iso.uid is None)
            except LaunchRefused as exc:
                raise LaunchError(str(exc)) from None
        command = spec.get("command")
        if isinstance(command, str) and command.strip():
            return ["/bin/sh", "-c", command]  # a command line: let the shell expand $PORT and friends
        if not command or not isinstance(command, list):
            raise LaunchError(f"The {workload.kind} spec has no command to run.")
        return replica_env_lib.expand_command(command, env)

    def _spawn(
        self, *, workload_id: int, attempt: int, replica: int, argv: list[str], command: list[str], env: dict,
        cwd: Path, sandboxed: bool, memory: int | None, keep_fds: tuple[int, ...] = (), watch: dict | None = None,
        pass_fds: list[tuple[int, str]] = (),
    ) -> dict:
        exit_path = replica_exit_path(workload_id, attempt, replica)
        exit_path.unlink(missing_ok=True)
        shim = [sys.executable, "-I", "-S", SHIM]
        if sandboxed:
            shim.append("--sandboxed")
        if memory:
            shim += ["--memory", str(memory)]
        for fd in keep_fds:
            shim += ["--keep-fd", str(fd)]
        if watch:
            shim += ["--limits", json.dumps(watch)]
        for fd, path in pass_fds:
            shim += ["--pass-fd", f"{fd}:{path}"]
        read_end, write_end = os.pipe()
        try:
            with open(replica_log_path(workload_id, attempt, replica), "ab") as log:
                os.chmod(log.fileno(), 0o600)
                # The shim detaches (fork) and reports the pid of the process that stays: the one we
                # start exits at once and is reaped right here, so no zombie is left under a worker.
                proc = subprocess.Popen(
                    [*shim, "--notify-fd", str(write_end), str(exit_path), "--", *argv],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                    start_new_session=True, close_fds=True, pass_fds=(write_end, *keep_fds),
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

    @staticmethod
    def _plan(workload_id: int, attempt: int, *, replicas: int, serves_port: bool, access_token: bool) -> dict:
        """The attempt's ports and access token, written before any replica starts and read back by
        a resumed launch, so that replicas started later join the ones already running."""
        path = attempt_dir(workload_id, attempt) / "launch.json"
        plan = _read_json(path)
        if plan is not None and len(plan.get("ports") or []) == (replicas if serves_port else 0):
            return plan
        taken: set[int] = set()
        plan = {
            "master_port": free_port(taken),
            "ports": [free_port(taken) for _ in range(replicas)] if serves_port else [],
            "token": secrets.token_urlsafe(24) if access_token else None,
        }
        _write_json(path, plan)
        return plan

    def _started_replica(self, workload_id: int, attempt: int, replica: int) -> dict | None:
        """The record of a replica of this attempt that already started, if one did: its launch
        record; or a live supervisor (shim) of it whose record was never written (the launcher
        died in between), recognised by its exit file's path in its command line, which names
        this installation's data directory, the workload, the attempt and the replica (the
        CAIRN_* tags in its environment do not: another Cairn on the machine has a workload 1
        too); or its exit file (it started, and has already ended)."""
        record = _read_json(replica_record_path(workload_id, attempt, replica))
        if record is not None:
            return record
        exit_path = str(replica_exit_path(workload_id, attempt, replica))
        for proc in psutil.process_iter(["cmdline"]):
            try:
                cmdline = proc.info["cmdline"] or []
                if exit_path not in cmdline or SHIM not in cmdline or os.getpgid(proc.pid) != proc.pid:
                    continue  # the replica's shim leads its own process group
                record = {"replica": replica, "pid": proc.pid, "create_time": proc.create_time()}
                _write_json(replica_record_path(workload_id, attempt, replica), record)
                return record
            except (psutil.Error, OSError):
                continue
        if Path(exit_path).exists():
            return {"replica": replica, "pid": None, "create_time": None}
        return None

    def started(self, workload: Workload, *, attempt: int) -> list[dict]:
        found = (self._started_replica(workload.pk, attempt, replica) for replica in range(workload.replicas))
        return [record for record in found if record is not None]

    # -- observe and signal --------------------------------------------------------------------------

    def observe(self, workload: Workload) -> list[ReplicaState]:
        runtime = workload.runtime or {}
        attempt = runtime.get("attempt")
        states = [self._observe_replica(workload.pk, attempt, record) for record in runtime.get("replicas", [])]
        if attempt is not None and runtime.get("isolation") in (sandbox.BWRAP_ROOT, sandbox.RUN_USER) \
                and not any(state.phase == RUNNING for state in states):
            netns.release_if_idle(workload.pk, int(attempt))  # the attempt's network goes with its last replica
        netns.sweep()
        return states

    def _observe_replica(self, workload_id: int, attempt: int, record: dict) -> ReplicaState:
        replica, slot = record["replica"], slot_of(record)
        # Alive first, then the exit file: the other order could call a replica that exits in
        # between "lost".
        if find_process(record.get("pid"), record.get("create_time")) is not None:
            return ReplicaState(replica=replica, phase=RUNNING, pid=record.get("pid"))
        result = _read_json(replica_exit_path(workload_id, attempt, slot))
        if result is not None:
            return ReplicaState(
                replica=replica, phase=EXITED, exit_code=int(result.get("exit_code", 1)),
                signal=result.get("signal"), finished_at=result.get("finished_at"), pid=record.get("pid"),
                reason=str(result.get("reason") or ""), detail=str(result.get("detail") or ""),
            )
        if record.get("pid"):
            # Tagged with the number it started as (CAIRN_REPLICA).
            _kill_stragglers(workload_id=workload_id, attempt=attempt, replica=int(record.get("started_as", replica)),
                             pgid=record["pid"])
        return ReplicaState(replica=replica, phase=LOST, pid=record.get("pid"))

    def signal(self, workload: Workload, *, force: bool = False) -> int:
        sig = signals.SIGKILL if force else signals.SIGTERM
        runtime = workload.runtime or {}
        # Replicas being drained after a scale-down are stopped with the rest.
        return sum(_signal_replica(record, sig) for record in [*runtime.get("replicas", []), *runtime.get("draining", [])])

    # -- logs ----------------------------------------------------------------------------------------

    def log_path(self, workload: Workload, *, replica: int, attempt: int) -> Path:
        return replica_log_path(workload.pk, attempt, self._log_slot(workload, replica, attempt))

    @staticmethod
    def _log_slot(workload: Workload, replica: int, attempt: int) -> int:
        runtime = workload.runtime or {}
        return _slot_for(runtime, replica) if runtime.get("attempt") == attempt else replica

    def logs(self, workload: Workload, *, replica: int, attempt: int, tail: int | None = None) -> str:
        return read_log(self.log_path(workload, replica=replica, attempt=attempt), tail=tail)

    def last_output_at(self, workload: Workload, *, replica: int, attempt: int) -> float | None:
        try:
            return replica_log_path(workload.pk, attempt, self._log_slot(workload, replica, attempt)).stat().st_mtime
        except OSError:
            return None

    def diagnose(self, workload: Workload, *, replicas: list[int]) -> str:
        runtime = workload.runtime or {}
        attempt = runtime.get("attempt")
        sections = [
            stacks.replica_stacks(replica=record["replica"], shim_pid=record.get("pid") or 0,
                                  create_time=record.get("create_time") or 0.0,
                                  log=replica_log_path(workload.pk, attempt, slot_of(record)))
            for record in runtime.get("replicas", []) if record.get("replica") in replicas
        ]
        return "".join(sections)

    def log_reader(self, workload: Workload, *, replica: int, attempt: int, tail: int | None) -> FileLogReader:
        slot = self._log_slot(workload, replica, attempt)
        return FileLogReader(workload_id=workload.pk, replica=slot, attempt=attempt, tail_lines=tail,
                             path=lambda n: replica_log_path(workload.pk, n, slot))
