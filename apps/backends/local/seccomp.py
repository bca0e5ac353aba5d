"""The seccomp filter of a bubblewrap sandbox: the kernel refuses a replica the system calls that
only serve to get out of it or into other processes (docs/local-backend.md, "Isolation").

Without capabilities a replica cannot mount or trace others anyway, except inside a user
namespace of its own, where it is root: that is the door this closes (user namespaces are the
way into most kernel privilege-escalation bugs). Refused with EPERM: new namespaces (unshare,
setns, clone with CLONE_NEW*), mounts (old and new API), ptrace and process_vm_*, the key
store, bpf, perf_event_open, userfaultfd, io_uring, kernel modules, kexec, open_by_handle_at,
swap, reboot, acct. clone3 answers ENOSYS: its flags lie in memory a filter cannot read, and the
C library falls back to clone, whose flags it can. Everything else is allowed.

The BPF program is built with libseccomp (pyseccomp: ctypes over Debian's libseccomp.so.2, with
the API of libseccomp's own Python bindings, which only Debian's /usr/bin/python3 can import)
once per process, for the native architecture and its 32-bit ones (x86 and x32 beside x86_64,
arm beside aarch64: a program may switch ABI), and written to a file in the data folder that
the shim opens as bubblewrap's `--seccomp` fd.
"""
from __future__ import annotations

import errno
import functools
import hashlib
import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

FD = 10  # the fd bubblewrap reads the program from (shim.py --pass-fd); a low one, under any RLIMIT_NOFILE

REFUSED = (
    "unshare", "setns",
    "mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
)
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)


def _library():
    try:
        import seccomp as library  # libseccomp's own bindings, where this Python has them
    except ImportError:
        import pyseccomp as library
    return library


def build() -> bytes:
    """The filter as a BPF program (raises OSError/ImportError where libseccomp is missing)."""
    sc = _library()
    filt = sc.SyscallFilter(defaction=sc.ALLOW)
    native = sc.system_arch()
    # A filter for one architecture kills the calls of the others: allow the 32-bit ABIs of this
    # machine under the same rules instead, so 32-bit programs still run.
    extra = {sc.Arch.X86_64: (sc.Arch.X86, sc.Arch.X32), sc.Arch.AARCH64: (sc.Arch.ARM,)}.get(native, ())
    for arch in extra:
        try:
            filt.add_arch(arch)
        except (OSError, ValueError):
            continue
    refuse = sc.ERRNO(errno.EPERM)
    for name in REFUSED:
        try:
            filt.add_rule(refuse, name)
        except (OSError, ValueError, RuntimeError):  # not a system call of this architecture
            continue
    # clone(flags, ...): its flags are the first argument, except on s390, where they are the second.
    flags_arg = 1 if native in (sc.Arch.S390, sc.Arch.S390X) else 0
    for flag in NAMESPACE_FLAGS:
        filt.add_rule(refuse, "clone", sc.Arg(flags_arg, sc.MASKED_EQ, flag, flag))
    try:
        filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    except (OSError, ValueError, RuntimeError):
        pass
    with tempfile.TemporaryFile() as out:
        filt.export_bpf(out)
        out.seek(0)
        return out.read()


@functools.cache
def program() -> bytes | None:
    """The BPF program, built once per process; None when the setting is off or libseccomp is
    missing (said once in the log)."""
    if str(settings.CAIRN.get("SECCOMP", "on")).lower() in ("off", "0", "false", "no"):
        return None
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - no filter is better than no replica; the log says so
        logger.warning("local backend: no seccomp filter in the sandbox (%s: %s); install libseccomp2 "
                       "and `pip install pyseccomp`", type(exc).__name__, exc)
        return None


def filter_path() -> Path | None:
    """The program's file in the data folder (written when missing or different), for the shim."""
    data = program()
    if data is None:
        return None
    path = Path(settings.CAIRN_DATA_DIR) / f"seccomp-{hashlib.sha256(data).hexdigest()[:16]}.bpf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seccomp-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return path
