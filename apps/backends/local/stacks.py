"""The Python stacks of a local replica, for the diagnosis of a hung training job.

First py-spy (`py-spy dump --nonblocking`: reads the process's memory, works on a stopped
process, needs ptrace rights); where it cannot attach, the replica's own faulthandler (the
`cairn` SDK registers SIGUSR2 in a Cairn job: every thread's stack goes to its log); and, for a
process that can do neither (stopped by SIGSTOP), what the kernel says of it (state, wchan).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

PY_SPY_TIMEOUT = 15.0
_FAULTHANDLER_WAIT = 2.0


def py_spy() -> str | None:
    """The py-spy next to Cairn's Python (requirements.txt pins it), else one on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def command_process(shim_pid: int, create_time: float) -> psutil.Process | None:
    """The replica's own command under its shim (not the shim, bubblewrap or setpriv)."""
    try:
        shim = psutil.Process(shim_pid)
        if abs(shim.create_time() - create_time) > 0.05:
            return None
        candidates = [p for p in shim.children(recursive=True)
                      if p.name() not in ("bwrap", "setpriv") and "-S" not in p.cmdline()]
    except psutil.Error:
        return None
    pythons = [p for p in candidates if "python" in p.name()]
    return (pythons or candidates or [None])[-1] if candidates else None


def _kernel_view(proc: psutil.Process) -> str:
    try:
        status = proc.status()
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text().strip() if os.path.exists(f"/proc/{proc.pid}/wchan") else ""
    except (psutil.Error, OSError):
        return "the process is gone"
    return f"process state: {status}{f', waiting in {wchan}' if wchan and wchan != '0' else ''}"


def _py_spy_dump(pid: int) -> tuple[str | None, str]:
    binary = py_spy()
    if binary is None:
        return None, "py-spy is not installed"
    error = ""
    for _ in range(2):  # it can fail to read a process on its first try
        try:
            done = subprocess.run([binary, "dump", "--nonblocking", "--pid", str(pid)], capture_output=True,
                                  text=True, timeout=PY_SPY_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"py-spy failed: {exc}"
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout, ""
        error = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        error = error[0]
    return None, f"py-spy could not attach ({error})"


def _faulthandler_dump(proc: psutil.Process, log: Path) -> str | None:
    """SIGUSR2 to a running replica whose SDK registered faulthandler; the stacks it logs."""
    try:
        if proc.status() == psutil.STATUS_STOPPED:
            return None
        size = log.stat().st_size
        proc.send_signal(signal.SIGUSR2)
    except (psutil.Error, OSError):
        return None
    deadline = time.monotonic() + _FAULTHANDLER_WAIT
    last = ""
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            with open(log, "rb") as f:
                f.seek(size)
                text = f.read(200_000).decode("utf-8", "replace")
        except OSError:
            return None
        if text and text == last and "File " in text:  # written, and no longer growing
            return text
        last = text
    return last or None


def replica_stacks(*, replica: int, shim_pid: int, create_time: float, log: Path) -> str:
    """A section of the diagnosis for one replica."""
    proc = command_process(shim_pid, create_time)
    header = f"=== replica {replica}"
    if proc is None:
        return f"{header}: its process is gone ===\n"
    header += f" (pid {proc.pid}, {_kernel_view(proc)}) ==="
    stacks, problem = _py_spy_dump(proc.pid)
    if stacks:
        return f"{header}\n[py-spy]\n{stacks}\n"
    dumped = _faulthandler_dump(proc, log)
    if dumped:
        return f"{header}\n[{problem}; stacks from the replica's faulthandler (SIGUSR2)]\n{dumped}\n"
    return f"{header}\n[{problem}; no faulthandler answer: the process cannot run (stopped?)]\n"
