"""How a local replica is kept away from Cairn and from other workloads.

Four levels, chosen once per process from what the host offers (`isolation()`):

  bubblewrap + run user  Cairn runs as root and bubblewrap (`bwrap`) is installed. The replica gets
                         a private PID, IPC and UTS namespace and a filesystem of its own: system
                         directories and Cairn's Python read-only, a private /tmp and /dev/shm, its
                         workload's work and home folders writable, allowed paths read-only, and
                         nothing else (no data folder, no checkout, no database files or sockets).
                         Inside, it runs as the unprivileged run user (`CAIRN_RUN_USER`).
  bubblewrap             Cairn is not root and bwrap works through user namespaces: the same
                         filesystem and namespaces; the replica keeps Cairn's uid, but cannot see
                         or signal Cairn's processes nor open its files.
  run user               Cairn runs as root without bwrap: the replica runs as the run user, so
                         Unix permissions keep it out of Cairn's processes (/proc/<pid>/environ)
                         and files. Workloads can still see each other's processes.
  none                   Cairn is not root and bwrap is missing: replicas are NOT isolated from
                         Cairn. Said at start-up, on the dashboard and in docs/local-backend.md.

Network: where Cairn is root with a run user, every workload attempt runs in a network namespace
of its own (netns.py), entered before bubblewrap. Otherwise replicas share the host's network,
except deployments under bubblewrap (`--unshare-net`: a private loopback, no network), which are
reached through a unix socket (bridge.py, apps/deployments/gateway.py) either way.

Limits: twice the replica's memory request (2 GiB at least) is RLIMIT_DATA of each process; the replica
as a whole is held to the request (and to a number of processes and a disk size) by limits.py, and /tmp
and /dev/shm are sized tmpfs. A seccomp filter (seccomp.py) refuses namespaces, mounts, ptrace
and the like in the sandbox. The argv builders here are pure; `isolation()` probes once.
"""
from __future__ import annotations

import functools
import glob
import logging
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

BWRAP_ROOT = "bubblewrap+user"
BWRAP = "bubblewrap"
RUN_USER = "user"
NONE = "none"

# The smallest memory limit a replica gets, whatever it asked for: Python alone maps ~30 MiB.
MIN_MEMORY_LIMIT = 256 * 1024 * 1024
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


@dataclass(frozen=True)
class Isolation:
    level: str
    bwrap: str | None = None  # path of the bwrap binary
    uid: int | None = None  # the run user, when Cairn drops to it
    gid: int | None = None
    user: str | None = None
    problem: str = ""  # why a stronger level is not in use, for the start-up warning

    @property
    def isolated(self) -> bool:
        return self.level != NONE

    def describe(self) -> str:
        return {
            BWRAP_ROOT: f"replicas run sandboxed (bubblewrap) as the unprivileged user '{self.user}'",
            BWRAP: "replicas run sandboxed (bubblewrap: private PID namespace and filesystem)",
            RUN_USER: f"replicas run as the unprivileged user '{self.user}' (no bubblewrap: "
                      "workloads can see each other's processes)",
            NONE: "replicas are NOT isolated from Cairn: they run as Cairn's own user "
                  "(install bubblewrap, or run Cairn as root with a run user)",
        }[self.level]


def _bwrap_works(bwrap: str) -> bool:
    try:
        done = subprocess.run(
            [bwrap, "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _run_user() -> pwd.struct_passwd | None:
    for name in (settings.CAIRN["RUN_USER"], "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


@functools.cache
def isolation() -> Isolation:
    """The isolation level of this host, probed once per process (CAIRN_SANDBOX: auto|off)."""
    if settings.CAIRN["SANDBOX"] == "off":
        return Isolation(NONE, problem="CAIRN_SANDBOX=off")
    bwrap = shutil.which("bwrap")
    usable = bwrap is not None and _bwrap_works(bwrap)
    problem = "" if usable else ("bubblewrap (bwrap) is not installed" if bwrap is None
                                 else "bubblewrap is installed but cannot create namespaces here")
    if os.geteuid() == 0:
        user = _run_user()
        if user is None or user.pw_uid == 0:
            return Isolation(NONE, problem=f"no run user: create '{settings.CAIRN['RUN_USER']}' (useradd --system)")
        level = BWRAP_ROOT if usable else RUN_USER
        return Isolation(level, bwrap=bwrap if usable else None, uid=user.pw_uid, gid=user.pw_gid,
                         user=user.pw_name, problem=problem)
    if usable:
        return Isolation(BWRAP, bwrap=bwrap)
    return Isolation(NONE, problem=problem)


def memory_limit(memory_bytes: int | None) -> int | None:
    if not memory_bytes or memory_bytes <= 0:
        return None
    return max(int(memory_bytes), MIN_MEMORY_LIMIT)


def python_mounts() -> list[str]:
    """Directories Cairn's Python and the `cairn` SDK live in, which a replica needs read-only."""
    dirs = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    try:
        import cairn  # the SDK, installed from ./sdk (editable in a checkout)

        dirs.add(str(Path(cairn.__file__).resolve().parent.parent))
    except ImportError:
        pass
    return sorted(d for d in dirs if d and os.path.isdir(d) and not any(d.startswith(s + "/") or d == s for s in ("/usr",)))


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def bwrap_argv(
    *, bwrap: str, command: Sequence[str], cwd: str, writable: Sequence[str], readable: Sequence[str] = (),
    shared: Sequence[str] = (), hidden: Sequence[str] = (), devices: Sequence[str] = (), network: bool = True,
    binds: Sequence[tuple[str, str, bool]] = (), tmp_size: int | None = None, shm_size: int | None = None,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The bwrap command line that runs `command` in a sandbox: `readable` mounted read-only,
    `shared` (allowed paths) read-write where Unix permissions let the replica write, `hidden`
    covered by an empty tmpfs where they lie inside those, `writable` read-write. Without
    `network` the sandbox gets a network namespace of its own: a private loopback, nothing else
    (deployments: reached through a unix socket in a `writable` folder, see bridge.py). `binds`
    are (source, mount point, read_only): project volumes, datasets and models (apps/storage),
    mounted last so nothing covers them. `tmp_size`, `shm_size`: bytes of the private /tmp and
    /dev/shm (tmpfs, RAM: unbounded they let one replica fill the host's memory). `seccomp_fd`: an
    fd the caller opens in bwrap holding the seccomp BPF program (seccomp.py). Pure apart
    from looking at which system directories exist (symlinks on merged-/usr systems)."""
    argv = [
        bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        *([] if network else ["--unshare-net"]),
        "--hostname", "cairn-replica",
        *_system_binds(),
        "--proc", "/proc", "--dev", "/dev",
        "--perms", "1777", *(["--size", str(tmp_size)] if tmp_size else []), "--tmpfs", "/tmp",
        "--perms", "1777", *(["--size", str(shm_size)] if shm_size else []), "--tmpfs", "/dev/shm",
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
    ]
    system = [p for p in _SYSTEM_DIRS if os.path.lexists(p)] + ["/proc", "/dev"]
    # A directory reached through a symlink (a virtualenv linked into a checkout, say) is mounted
    # at its real path, and the link is recreated unless an allowed path already brings it along.
    links = {p: os.path.realpath(p) for p in readable if os.path.realpath(p) != p}
    readable = [links.get(p, p) for p in readable]
    # Nested read-only mounts add nothing: keep the outermost of each.
    readable = [p for p in dict.fromkeys(readable) if not _inside(p, [r for r in readable if r != p])]
    shared = [p for p in dict.fromkeys(shared) if p not in readable]
    mounted = readable + shared
    hidden = [p for p in hidden if _inside(p, mounted)]  # e.g. the data folder inside an allowed path
    created: set[str] = {"/tmp", "/dev/shm"}

    def exists(path: str) -> bool:
        if path in created:
            return True
        if _inside(path, hidden):
            return path in hidden  # an empty tmpfs: only its top exists
        return _inside(path, mounted) or _inside(path, system)

    def make_parents(path: str) -> None:
        # bubblewrap would create missing parents 0700, which the run user cannot pass through.
        parts = Path(path).parts[1:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            if not exists(parent):
                argv.extend(["--perms", "0755", "--dir", parent])
                created.add(parent)

    for path in devices:
        argv += ["--dev-bind", path, path]
    # Allowed paths first, so that Cairn's Python stays read-only (and present) when it lies inside one.
    for path in shared:
        make_parents(path)
        argv += ["--bind", path, path]
    for path in readable:
        make_parents(path)
        argv += ["--ro-bind", path, path]
    for link, target in links.items():
        if not exists(link):
            make_parents(link)
            argv += ["--symlink", target, link]
            created.add(link)
    for path in hidden:
        argv += ["--perms", "0755", "--tmpfs", path]
    for path in dict.fromkeys(writable):
        make_parents(path)
        argv += ["--bind", path, path]
    for source, target, read_only in binds:
        make_parents(target)
        argv += ["--ro-bind" if read_only else "--bind", source, target]
    argv += ["--chdir", cwd, "--", *command]
    return argv


def drop_to_user_argv(*, uid: int, gid: int, command: Sequence[str]) -> list[str]:
    """util-linux setpriv: become the run user with no supplementary groups and no capabilities."""
    return [
        "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *command,
    ]


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*"))


def wrap(
    iso: Isolation, *, command: Sequence[str], cwd: Path, writable: Sequence[Path],
    shared: Sequence[str] = (), hidden: Sequence[Path] = (), network: bool = True,
    binds: Sequence[tuple[str, str, bool]] = (), readable: Sequence[str] = (),
    tmp_size: int | None = None, shm_size: int | None = None, seccomp_fd: int | None = None,
) -> list[str]:
    """`command` wrapped for this host's isolation level (`network`, `binds`, `tmp_size`,
    `shm_size`, `seccomp_fd`: see bwrap_argv; `readable`: read-only besides Cairn's Python)."""
    command = list(command)
    if iso.uid is not None:
        command = drop_to_user_argv(uid=iso.uid, gid=iso.gid, command=command)
    if iso.level in (BWRAP_ROOT, BWRAP):
        return bwrap_argv(
            bwrap=iso.bwrap, command=command, cwd=str(cwd), writable=[str(p) for p in writable],
            readable=[*python_mounts(), *readable], shared=shared, hidden=[str(p) for p in hidden], devices=gpu_devices(),
            network=network, binds=binds, tmp_size=tmp_size, shm_size=shm_size, seccomp_fd=seccomp_fd,
        )
    return command


def unreachable_python(iso: Isolation) -> str | None:
    """Without bubblewrap, the run user needs to reach Cairn's Python itself; say when it cannot
    (a Python under /root, mode 0700, is the usual case)."""
    if iso.level != RUN_USER:
        return None
    path = Path(sys.executable)
    for parent in [*reversed(path.parents)][1:]:
        try:
            mode = parent.stat().st_mode
        except OSError:
            continue
        if not mode & 0o001:
            return (f"The run user '{iso.user}' cannot reach Cairn's Python ({sys.executable}): {parent} is "
                    f"not searchable by others. Install bubblewrap, or install Python where every user can run it.")
    return None


def prepare_dirs(iso: Isolation, *, writable: Sequence[Path], traverse: Sequence[Path], data_dir: Path) -> None:
    """Folders the replica writes are its run user's. Without bubblewrap the run user must pass
    through the data folder to reach them: those folders become 0711 (no listing), and everything
    else in the data folder (the SQLite database, ...) loses its access for others."""
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)
        if iso.uid is not None:
            os.chown(path, iso.uid, iso.gid)
        os.chmod(path, 0o700)
    if iso.level == RUN_USER:
        for path in traverse:
            os.chmod(path, 0o711)
        for child in data_dir.iterdir():
            if child.name != "workloads":
                os.chmod(child, child.stat().st_mode & ~0o007)
