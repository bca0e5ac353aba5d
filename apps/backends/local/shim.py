"""Supervise one replica process: run it, forward stop signals, record how it exited.

Usage: python -I -S shim.py [--notify-fd FD] [--keep-fd FD] [--sandboxed] [--memory BYTES] EXIT_FILE -- COMMAND [ARG ...]

Started by the local backend in its own session, so it outlives a crash of the Cairn process
that launched it. It imports nothing but the standard library (no Django), so it starts fast.

- With --notify-fd, the shim detaches (forks; the first process exits at once, so the launcher
  reaps it and never holds a zombie) and writes its own pid to FD. The detached shim leads a
  new session and process group and is reaped by init when it ends.
- With --keep-fd (repeatable), the command inherits FD (a deployment's listening socket, made
  by Cairn: bridge.py) and the shim closes its own copy once the command started.
- With --memory, RLIMIT_DATA of the command (and of everything it starts) is BYTES.
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


def write_exit_file(path: str, returncode: int, *, sandboxed: bool = False) -> None:
    sig = -returncode if returncode < 0 else None
    if sandboxed and 128 < returncode < 128 + 65:  # bubblewrap reports a killed command as 128 + signal
        sig = returncode - 128
    record = {
        "exit_code": 128 + sig if sig else returncode,
        "signal": sig,
        "finished_at": time.time(),
    }
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


def parse(argv: list[str]):
    options = {"notify_fd": None, "sandboxed": False, "memory": None, "keep_fd": []}
    rest = argv[1:]
    while rest and rest[0].startswith("--") and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--sandboxed":
            options["sandboxed"] = True
        elif flag in ("--notify-fd", "--memory") and rest:
            options[flag[2:].replace("-", "_")] = int(rest.pop(0))
        elif flag == "--keep-fd" and rest:
            options["keep_fd"].append(int(rest.pop(0)))
        else:
            return None
    if len(rest) < 3 or rest[1] != "--":
        return None
    return options, rest[0], rest[2:]


def main(argv: list[str]) -> int:
    parsed = parse(argv)
    if parsed is None:
        sys.stderr.write("usage: shim.py [--notify-fd FD] [--keep-fd FD] [--sandboxed] [--memory BYTES] EXIT_FILE -- COMMAND [ARG ...]\n")
        return 2
    options, exit_file, command = parsed
    sandboxed = options["sandboxed"]
    if options["notify_fd"] is not None:
        detach(options["notify_fd"])
    if options["memory"]:
        resource.setrlimit(resource.RLIMIT_DATA, (options["memory"], options["memory"]))
    child = None
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
        child = subprocess.Popen(command, pass_fds=options["keep_fd"])
    except OSError as exc:
        sys.stderr.write(f"cairn: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
        write_exit_file(exit_file, 127)
        return 127
    for fd in options["keep_fd"]:
        os.close(fd)  # the command has it; the shim must not keep a socket alive past its bridge
    for signum in pending:
        forward(signum, None)

    returncode = child.wait()  # PEP 475: retried after each forwarded signal
    write_exit_file(exit_file, returncode, sandboxed=sandboxed)
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
