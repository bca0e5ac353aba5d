"""Supervise one replica process: run it, forward stop signals, record how it exited.

Usage: python -I -S shim.py [--notify-fd FD] [--keep-fd FD] [--sandboxed] [--memory BYTES]
                            [--limits JSON] [--pass-fd N:PATH] EXIT_FILE -- COMMAND [ARG ...]

Started by the local backend in its own session, so it outlives a crash of the Cairn process
that launched it. It imports nothing but the standard library (no Django), so it starts fast.

- With --notify-fd, the shim detaches (forks; the first process exits at once, so the launcher
  reaps it and never holds a zombie) and writes its own pid to FD. The detached shim leads a
  new session and process group and is reaped by init when it ends.
- With --keep-fd (repeatable), the command inherits FD (a deployment's listening socket, made
  by Cairn: bridge.py) and the shim closes its own copy once the command started.
- With --memory, RLIMIT_DATA of the command (and of everything it starts) is a backstop of
  twice BYTES and at least 2 GiB: it counts address space a process maps, not memory it uses
  (importing PyPI's CUDA build of torch maps ~1 GiB on a CPU-only host), so the replica's real
  limit is the watchdog's or the cgroup's sum below; the backstop only stops one process from
  growing without bound between two looks.
- With --limits JSON, the replica as a whole is held to them (limits.py): RLIMIT_NPROC, a cgroup
  of its own where the host delegates one, and a watchdog thread that kills the replica over its
  memory, process or disk limit and records why (`reason`, `detail`) in EXIT_FILE.
- With --pass-fd N:PATH, PATH is opened read-only as fd N of the command (bubblewrap's --seccomp).
- SIGTERM, SIGINT and SIGHUP are forwarded to the command. With --sandboxed the command is
  bubblewrap, which does not forward signals: they go to the process bubblewrap runs.
- When the command exits, its exit code is written atomically to EXIT_FILE as JSON
  ({"exit_code": ..., "signal": ..., "finished_at": ...}); a Cairn reconciler that was down at
  the time still finds out how it ended.
- Then the rest of the replica's process group (anything the command left behind) is killed,
  like the processes of a container when its main process exits.
"""
import json
import os
import resource
import signal
import subprocess
import sys
import time

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# RLIMIT_DATA never below this (see --memory above).
DATA_BACKSTOP_MIN = 2 << 30


def write_exit_file(path: str, returncode: int, *, sandboxed: bool = False, reason: str = "",
                    detail: str = "") -> None:
    sig = -returncode if returncode < 0 else None
    if sandboxed and 128 < returncode < 128 + 65:  # bubblewrap reports a killed command as 128 + signal
        sig = returncode - 128
    record = {
        "exit_code": 128 + sig if sig else returncode,
        "signal": sig,
        "finished_at": time.time(),
    }
    if reason:  # stopped by the watchdog: why, for the workload's status
        record.update(reason=reason, detail=detail)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def signal_targets(child_pid: int, sandboxed: bool) -> list[int]:
    """Who gets a forwarded signal: the command, or inside bubblewrap (bwrap -> its init, pid 1
    of the sandbox -> the command) the sandbox init's children. While the sandbox is still being
    set up there are none yet: then bubblewrap itself, which takes the whole sandbox down."""
    if sandboxed:
        commands = [pid for init in children_of(child_pid) for pid in children_of(init)]
        if commands:
            return commands
    return [child_pid]


def detach(notify_fd: int) -> None:
    """Fork; the parent exits at once, the child leads a new session and reports its pid."""
    if os.fork():
        os._exit(0)
    os.setsid()
    os.write(notify_fd, str(os.getpid()).encode())
    os.close(notify_fd)


def load_limits():
    """limits.py, next to this file (not importable by name under -I)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "cairn_shim_limits", os.path.join(os.path.dirname(os.path.abspath(__file__)), "limits.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse(argv: list[str]):
    options = {"notify_fd": None, "sandboxed": False, "memory": None, "keep_fd": [], "limits": None, "pass_fds": []}
    rest = argv[1:]
    while rest and rest[0].startswith("--") and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--sandboxed":
            options["sandboxed"] = True
        elif flag in ("--notify-fd", "--memory") and rest:
            options[flag[2:].replace("-", "_")] = int(rest.pop(0))
        elif flag == "--keep-fd" and rest:
            options["keep_fd"].append(int(rest.pop(0)))
        elif flag == "--limits" and rest:
            try:
                options["limits"] = json.loads(rest.pop(0))
            except ValueError:
                return None
        elif flag == "--pass-fd" and rest:
            number, _, path = rest.pop(0).partition(":")
            if not number.isdigit() or not path:
                return None
            options["pass_fds"].append((int(number), path))
        else:
            return None
    if len(rest) < 3 or rest[1] != "--":
        return None
    return options, rest[0], rest[2:]


def main(argv: list[str]) -> int:
    parsed = parse(argv)
    if parsed is None:
        sys.stderr.write("usage: shim.py [--notify-fd FD] [--keep-fd FD] [--sandboxed] [--memory BYTES] "
                         "[--limits JSON] [--pass-fd N:PATH] EXIT_FILE -- COMMAND [ARG ...]\n")
        return 2
    options, exit_file, command = parsed
    sandboxed = options["sandboxed"]
    if options["notify_fd"] is not None:
        detach(options["notify_fd"])
    if options["memory"]:
        backstop = max(2 * options["memory"], DATA_BACKSTOP_MIN)
        resource.setrlimit(resource.RLIMIT_DATA, (backstop, backstop))
    limits = options["limits"] or {}
    lib = load_limits() if limits else None
    cgroup = None
    if limits.get("cgroup"):
        try:
            cgroup = lib.Cgroup(limits["cgroup"])
            cgroup.create(memory=limits.get("memory"), tasks=limits.get("nproc"))
        except OSError as exc:  # the watchdog measures memory instead
            sys.stderr.write(f"cairn: no cgroup for this replica ({exc}); memory is watched instead\n")
            cgroup = None
    passed = []
    for number, path in options["pass_fds"]:
        if number in options["keep_fd"] or number <= 2:
            sys.stderr.write(f"cairn: fd {number} for {path} is taken\n")
            write_exit_file(exit_file, 127)
            return 127
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        if fd != number:
            os.dup2(fd, number, inheritable=False)
            os.close(fd)
        passed.append(number)

    def in_child():
        # Between fork and exec, in the command's process only: the shim itself stays outside.
        if limits.get("nproc"):
            resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
        if cgroup is not None:
            cgroup.join()

    child = None
    watchdog = None
    pending: list[int] = []

    def forward(signum, frame):
        if child is None:
            pending.append(signum)  # arrived before the command started: deliver right after
            return
        for pid in signal_targets(child.pid, sandboxed):
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    for signum in FORWARDED:
        signal.signal(signum, forward)

    try:
        child = subprocess.Popen(command, pass_fds=[*options["keep_fd"], *passed],
                                 preexec_fn=in_child if limits else None)
    except (OSError, subprocess.SubprocessError) as exc:
        sys.stderr.write(f"cairn: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
        write_exit_file(exit_file, 127)
        return 127
    for fd in options["keep_fd"]:
        os.close(fd)  # the command has it; the shim must not keep a socket alive past its bridge
    for fd in passed:
        os.close(fd)
    if limits:
        watchdog = lib.Watchdog(
            child.pid, memory=limits.get("memory"), processes=limits.get("processes"),
            disk_paths=limits.get("disk_paths"), disk_limit=limits.get("disk_limit"), cgroup=cgroup,
        )
        watchdog.start()
    for signum in pending:
        forward(signum, None)

    returncode = child.wait()  # PEP 475: retried after each forwarded signal
    if watchdog is not None:
        watchdog.stop()
        watchdog.join(timeout=5)
        watchdog.last_look()
    verdict = {"reason": watchdog.reason, "detail": watchdog.detail} if watchdog is not None else {}
    write_exit_file(exit_file, returncode, sandboxed=sandboxed, **verdict)
    if cgroup is not None:
        cgroup.remove()
    sys.stdout.flush()
    sys.stderr.flush()
    # Take down whatever the command left running in the replica's process group, shim included.
    for signum in FORWARDED:
        signal.signal(signum, signal.SIG_DFL)
    if os.getpgrp() == os.getpid():  # only when we lead our own group (started in a new session)
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
