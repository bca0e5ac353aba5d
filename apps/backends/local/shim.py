"""Supervise one replica process: run it, forward stop signals, record how it exited.

Usage: python -I -S shim.py EXIT_FILE -- COMMAND [ARG ...]

Started by the local backend in its own session, so it outlives a crash of the Cairn process
that launched it. It imports nothing but the standard library (no Django), so it starts fast.

- SIGTERM, SIGINT and SIGHUP are forwarded to the command.
- When the command exits, its exit code is written atomically to EXIT_FILE as JSON
  ({"exit_code": ..., "signal": ..., "finished_at": ...}); a Cairn reconciler that was down at
  the time still finds out how it ended.
- Then the rest of the replica's process group (anything the command left behind) is killed,
  like the processes of a container when its main process exits.
"""
import json
import os
import signal
import subprocess
import sys
import time

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def write_exit_file(path: str, returncode: int) -> None:
    sig = -returncode if returncode < 0 else None
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


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: shim.py EXIT_FILE -- COMMAND [ARG ...]\n")
        return 2
    exit_file, command = argv[1], argv[3:]
    child = None
    pending: list[int] = []

    def forward(signum, frame):
        if child is None:
            pending.append(signum)  # arrived before the command started: deliver right after
            return
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)

    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        sys.stderr.write(f"cairn: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
        write_exit_file(exit_file, 127)
        return 127
    for signum in pending:
        forward(signum, None)

    returncode = child.wait()  # PEP 475: retried after each forwarded signal
    write_exit_file(exit_file, returncode)
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
