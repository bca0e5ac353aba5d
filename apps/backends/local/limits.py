"""Limits of a local replica as a whole, not per process (docs/local-backend.md, "Limits").

RLIMIT_DATA bounds each process alone: five processes of a 512Mi job held 2.4 GiB. Here:

- Memory: where the host delegates cgroup v2 with the memory controller (`cgroup_parent()`), the
  shim puts the replica in a cgroup of its own with memory.max = the limit (the kernel enforces
  it; memory.oom.group kills the whole replica). Elsewhere a watchdog sums the unreclaimable
  memory (anonymous + shared memory, PSS: pages shared after fork are split, not counted twice)
  of every process of the replica every PERIOD seconds and stops it: `OutOfMemory`.
- Processes: the watchdog counts them (`ProcessLimitExceeded`); RLIMIT_NPROC (set by the shim)
  is the kernel's brake on a fork bomb between two looks, counted per user.
- Disk: the workload's folders, measured like `du -x` by a walk that spends at most a slice of
  time per look and carries on at the next (`DiskQuotaExceeded`).

The watchdog runs as a thread of the replica's shim (shim.py): the shim already supervises the
replica, outlives a crash of Cairn, and ends with it. This module is imported by the shim (loaded
from its file, under `python -I -S`): standard library only at the top; Django in functions.
"""
from __future__ import annotations

import os
import signal
import threading
import time

OUT_OF_MEMORY = "OutOfMemory"
PROCESS_LIMIT_EXCEEDED = "ProcessLimitExceeded"
DISK_QUOTA_EXCEEDED = "DiskQuotaExceeded"

PERIOD = 0.5  # seconds between two looks at memory and processes
DISK_PERIOD = 5.0  # seconds from the end of one walk of the disk to the start of the next
DISK_SLICE = 0.05  # seconds of walking per look, at most (a walk of a million files spans many)

_PAGE = os.sysconf("SC_PAGE_SIZE")


def size(n: float) -> str:
    """1.5 GiB, 512 MiB: for messages."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


# -- the processes of a replica -------------------------------------------------------------------

def children(pid: int) -> list[int]:
    """Children of every thread of `pid` (a thread that forks is the child's parent)."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
    return found


def process_tree(root: int) -> list[int]:
    """`root` and its descendants, parents first. In a bubblewrap sandbox that is every process
    of the sandbox: orphans are adopted by its init, a descendant of bwrap."""
    seen, order, todo = {root}, [root], [root]
    while todo:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                order.append(child)
                todo.append(child)
    return order


def resident(pid: int) -> int:
    """Resident bytes (cheap: statm); an upper bound of what `unreclaimable` counts."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def unreclaimable(pid: int) -> int:
    """Anonymous and shared-memory bytes of `pid`, proportional share (smaps_rollup, Linux 5.9+
    for the split; before that all of PSS, file pages included)."""
    fields: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("Pss", "Pss_Anon", "Pss_Shmem"):
                    fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return resident(pid)
    if "Pss_Anon" in fields:
        return fields["Pss_Anon"] + fields.get("Pss_Shmem", 0)
    return fields.get("Pss", 0)


def memory_of(pids: list[int], limit: int) -> int:
    """What the processes hold together, looked at closely only when it may be over `limit`."""
    total = sum(resident(pid) for pid in pids)
    if total <= limit:
        return total
    return sum(unreclaimable(pid) for pid in pids)


def kill_tree(root: int) -> None:
    """SIGKILL the replica's processes, parents first (a sandbox's init takes its namespace with it),
    looking again until nothing is left of it: a process may fork meanwhile."""
    for _ in range(20):
        pids = process_tree(root)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if all(_gone(pid) for pid in pids):
            return
        time.sleep(0.01)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


# -- disk ------------------------------------------------------------------------------------------

class DiskUsage:
    """Bytes allocated under some folders (like `du -x`: blocks, hard links once, symlinks not
    followed, other file systems skipped), measured a slice of time at a time."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self._walk = None
        self.partial = 0  # bytes counted so far by the walk under way

    def step(self, budget: float) -> int | None:
        """Walk on for about `budget` seconds: the total when the walk ends, else None (and
        `partial`, a lower bound, is up to date)."""
        if self._walk is None:
            self._walk = self._walker()
        deadline = time.monotonic() + budget
        try:
            while True:  # at least one batch, however small the budget
                self.partial = next(self._walk)
                if time.monotonic() >= deadline:
                    break
        except StopIteration as done:
            self._walk = None
            return done.value
        return None

    def measure(self) -> int:
        while (total := self.step(60.0)) is None:
            pass
        return total

    def _walker(self):
        total, seen, since = 0, set(), 0
        for root in self.paths:
            try:
                device = os.lstat(root).st_dev
            except OSError:
                continue
            todo = [root]
            while todo:
                try:
                    with os.scandir(todo.pop()) as entries:
                        for entry in entries:
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            if st.st_dev != device:
                                continue  # a mount point: another file system
                            if st.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                                if (st.st_dev, st.st_ino) in seen:
                                    continue
                                seen.add((st.st_dev, st.st_ino))
                            total += st.st_blocks * 512
                            if entry.is_dir(follow_symlinks=False):
                                todo.append(entry.path)
                            since += 1
                            if since >= 64:
                                since = 0
                                yield total
                except OSError:
                    continue
                yield total
        return total


# -- cgroup v2 -------------------------------------------------------------------------------------

def _cgroup2_mount() -> str | None:
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    return left.split()[4]
    except OSError:
        pass
    return None


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def usable_cgroup_parent(path: str) -> bool:
    """A cgroup v2 folder whose children get the memory controller and that we may write."""
    try:
        with open(os.path.join(path, "cgroup.subtree_control")) as f:
            enabled = f.read().split()
    except OSError:
        return False
    return "memory" in enabled and os.access(path, os.W_OK)


def find_cgroup_parent(setting: str) -> str | None:
    if setting == "off":
        return None
    if setting:
        return setting if usable_cgroup_parent(setting) else None
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return None
    here = os.path.normpath(mount + "/" + own)
    for candidate in (here, os.path.dirname(here)):
        if candidate.startswith(mount) and usable_cgroup_parent(candidate):
            return candidate
    return None


_cgroup_parent: list[str | None] = []


def cgroup_parent() -> str | None:
    """Where replicas get cgroups of their own (CAIRN["CGROUP_PARENT"]), found once; None: the
    watchdog measures memory."""
    from django.conf import settings

    if not _cgroup_parent:
        _cgroup_parent.append(find_cgroup_parent(str(settings.CAIRN.get("CGROUP_PARENT", ""))))
    return _cgroup_parent[0]


class Cgroup:
    """The replica's own cgroup (v2): created and filled in by the shim before the command starts,
    removed when it is over."""

    def __init__(self, path: str):
        self.path = path

    def create(self, *, memory: int | None, tasks: int | None) -> None:
        os.makedirs(self.path, exist_ok=True)
        if memory:
            self._write("memory.max", str(memory))
            self._write("memory.swap.max", "0", optional=True)  # the limit is of memory, not swap
            self._write("memory.oom.group", "1", optional=True)  # one OOM kill takes the replica down
        if tasks:
            self._write("pids.max", str(tasks), optional=True)  # only where pids is delegated too

    def join(self) -> None:
        """Move the calling process in (run in the child between fork and exec)."""
        self._write("cgroup.procs", "0")

    def oom_kills(self) -> int:
        try:
            with open(os.path.join(self.path, "memory.events")) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def peak(self) -> int:
        for name in ("memory.peak", "memory.current"):
            try:
                with open(os.path.join(self.path, name)) as f:
                    return int(f.read())
            except (OSError, ValueError):
                continue
        return 0

    def remove(self) -> None:
        """Kill what is left in it and remove it (a cgroup goes only once empty)."""
        self._write("cgroup.kill", "1", optional=True)
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)

    def _write(self, name: str, value: str, *, optional: bool = False) -> None:
        try:
            with open(os.path.join(self.path, name), "w") as f:
                f.write(value)
        except OSError:
            if not optional:
                raise


# -- the watchdog ----------------------------------------------------------------------------------

class Watchdog(threading.Thread):
    """Looks at one replica (the process tree under `root`) every PERIOD seconds until `stop()`;
    over a limit it kills the replica and keeps why in `reason` and `detail`."""

    def __init__(self, root: int, *, memory: int | None = None, processes: int | None = None,
                 disk_paths: list[str] | None = None, disk_limit: int | None = None,
                 cgroup: Cgroup | None = None, period: float = PERIOD, disk_period: float = DISK_PERIOD):
        super().__init__(name="cairn-watchdog", daemon=True)
        self.root, self.memory, self.processes, self.cgroup = root, memory, processes, cgroup
        self.disk = DiskUsage(disk_paths) if disk_paths and disk_limit else None
        self.disk_limit = disk_limit
        self.period, self.disk_period = period, disk_period
        self.reason = ""
        self.detail = ""
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        next_walk = time.monotonic()
        while not self._stopped.wait(self.period):
            verdict = self.look()
            if verdict is None and self.disk is not None and time.monotonic() >= next_walk:
                total = self.disk.step(DISK_SLICE)
                used = self.disk.partial if total is None else total
                if used > self.disk_limit:
                    verdict = (DISK_QUOTA_EXCEEDED, f"its folders ({', '.join(self.disk.paths)}) hold {size(used)}, "
                                                    f"more than the workload's disk limit of {size(self.disk_limit)}.")
                elif total is not None:
                    next_walk = time.monotonic() + self.disk_period
            if verdict is not None:
                self.reason, self.detail = verdict
                if self.cgroup is not None:
                    self.cgroup._write("cgroup.kill", "1", optional=True)
                kill_tree(self.root)
                return

    def last_look(self) -> None:
        """After the command ended: a cgroup's OOM kill may have ended it between two looks."""
        if not self.reason and self.cgroup is not None and self.cgroup.oom_kills():
            self.reason, self.detail = OUT_OF_MEMORY, (f"its processes reached its memory limit of "
                                                       f"{size(self.memory or 0)}.")

    def look(self) -> tuple[str, str] | None:
        """Memory and processes: (reason, detail) when over a limit, else None."""
        pids = process_tree(self.root)
        if self.processes and len(pids) > self.processes:  # first: a fork bomb is not out of memory
            return PROCESS_LIMIT_EXCEEDED, (f"it ran {len(pids)} processes, more than its limit of "
                                            f"{self.processes}.")
        if self.cgroup is not None:
            if self.cgroup.oom_kills():
                return OUT_OF_MEMORY, (f"its processes reached its memory limit of {size(self.memory or 0)} "
                                       f"(cgroup peak {size(self.cgroup.peak())}).")
        elif self.memory:
            used = memory_of(pids, self.memory)
            if used > self.memory:
                return OUT_OF_MEMORY, (f"its {len(pids)} processes used {size(used)} of memory together, "
                                       f"more than its limit of {size(self.memory)}.")
        return None


def describe() -> str:
    """How replicas' memory is held to their request on this host, for the start-up log."""
    parent = cgroup_parent()
    if parent:
        return f"replica memory limited by cgroup v2 (memory.max, under {parent})"
    return "replica memory watched every 0.5 s (no cgroup v2 memory controller delegated to Cairn)"


# -- what the backend asks of the shim ------------------------------------------------------------

def tmpfs_sizes(memory_limit: int | None) -> tuple[int | None, int | None]:
    """Bytes of the sandbox's /tmp and /dev/shm: the settings, else the replica's memory limit
    for /tmp and half of it for /dev/shm (DataLoader workers pass batches through /dev/shm)."""
    from django.conf import settings

    tmp_mb, shm_mb = int(settings.CAIRN.get("TMP_SIZE_MB", 0)), int(settings.CAIRN.get("SHM_SIZE_MB", 0))
    tmp = tmp_mb * 1024 * 1024 if tmp_mb > 0 else memory_limit
    shm = shm_mb * 1024 * 1024 if shm_mb > 0 else (memory_limit // 2 if memory_limit else None)
    return tmp, shm


def shim_limits(*, memory: int | None, disk_paths: list[str], cgroup_name: str) -> dict:
    """The watchdog's part of the shim's options (`--limits JSON`)."""
    from django.conf import settings

    disk_gb = float(settings.CAIRN.get("DISK_LIMIT_GB", 0) or 0)
    parent = cgroup_parent()
    return {
        "memory": memory,
        "processes": int(settings.CAIRN.get("PROCESS_LIMIT", 0) or 0) or None,
        "nproc": int(settings.CAIRN.get("NPROC_LIMIT", 0) or 0) or None,
        "disk_paths": disk_paths if disk_gb > 0 else [],
        "disk_limit": int(disk_gb * 1024**3) if disk_gb > 0 else None,
        "cgroup": os.path.join(parent, cgroup_name) if parent else None,
    }
