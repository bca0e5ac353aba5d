"""The sandbox's seccomp filter, with real replicas (issue 44: sandboxes allowed user namespaces
and had no seccomp filter). A probe inside a replica tries the refused calls and a normal job's
work; it prints what happened as one JSON line."""
import json
import platform
import shutil
import textwrap

import pytest

from apps.backends.local import sandbox, seccomp
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, reconcile_until

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)

SYSCALLS = {  # numbers of the calls glibc has no wrapper for
    "x86_64": {"clone": 56, "keyctl": 250, "clone3": 435, "bpf": 321, "userfaultfd": 323},
    "aarch64": {"clone": 220, "keyctl": 219, "clone3": 435, "bpf": 280, "userfaultfd": 282},
}

PROBE_BODY = r"""
import ctypes, json, os, signal, subprocess, sys, threading, time

nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x00020000, 0x40000000
report = {}


def errno_of(result):
    return "ok" if result >= 0 else os.strerror(ctypes.get_errno())


report["unshare_user"] = errno_of(libc.unshare(CLONE_NEWUSER))
report["unshare_mount_net"] = errno_of(libc.unshare(CLONE_NEWNS | CLONE_NEWNET))
report["unshare_cmd"] = subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode
me = os.getpid()
report["clone_newuser"] = errno_of(libc.syscall(nr["clone"], CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0))
if os.getpid() != me:
    os._exit(0)  # without the filter, the clone's child (in a user namespace) leaves at once
report["clone3"] = errno_of(libc.syscall(nr["clone3"], 0, 0))
report["keyctl"] = errno_of(libc.syscall(nr["keyctl"], 0, -3, 0))  # KEYCTL_GET_KEYRING_ID, session keyring
report["bpf"] = errno_of(libc.syscall(nr["bpf"], 0, 0, 0))
report["userfaultfd"] = errno_of(libc.syscall(nr["userfaultfd"], 0))
report["mount"] = errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
report["ptrace_attach"] = errno_of(libc.ptrace(16, child, None, None))  # PTRACE_ATTACH
buf = ctypes.create_string_buffer(8)


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)
report["process_vm_readv"] = errno_of(libc.process_vm_readv(child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)

# A normal job's work still runs: numpy, threads, subprocesses, multiprocessing (fork and spawn).
import multiprocessing
import numpy

results = []
threads = [threading.Thread(target=lambda: results.append(int(numpy.ones(1000).sum()))) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
report["threads"] = results == [1000] * 4
report["subprocess"] = subprocess.run(["sh", "-c", "echo hi"], capture_output=True, text=True).stdout
for method in ("fork", "spawn"):
    with multiprocessing.get_context(method).Pool(2) as pool:
        report[f"pool_{method}"] = pool.map(abs, [-1, -2, -3])
print("PROBE " + json.dumps(report), flush=True)
"""
# Under a main guard: multiprocessing's spawn imports the main module again.
PROBE = 'if __name__ == "__main__":\n' + textwrap.indent(PROBE_BODY, "    ")


@pytest.fixture(autouse=True)
def _sandboxed():
    assert shutil.which("bwrap"), "bubblewrap is missing"
    if sandbox.isolation().level not in (sandbox.BWRAP_ROOT, sandbox.BWRAP):
        pytest.skip("no bubblewrap sandbox on this host")
    if platform.machine() not in SYSCALLS:
        pytest.skip(f"system call numbers of {platform.machine()} not in this test")


def test_a_replica_cannot_make_namespaces_trace_or_use_the_key_store_and_still_works(script):
    workload = admitted(memory_mb=1024, spec={"command": [
        "python", script(PROBE), json.dumps(SYSCALLS[platform.machine()])], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    try:
        workload = reconcile_until(workload, {S.SUCCEEDED, S.FAILED}, timeout=60)
    finally:
        log = workload_log_read(workload=workload)
        print(log)
    assert workload.status == S.SUCCEEDED, log
    report = json.loads(next(ln for ln in log.splitlines() if ln.startswith("PROBE ")).removeprefix("PROBE "))
    refused = "Operation not permitted"
    assert report["unshare_user"] == refused
    assert report["unshare_mount_net"] == refused
    assert report["unshare_cmd"] != 0
    assert report["clone_newuser"] == refused
    assert report["clone3"] == "Function not implemented"  # the C library falls back to clone
    assert report["keyctl"] == refused
    assert report["bpf"] == refused
    assert report["userfaultfd"] == refused
    assert report["mount"] == refused
    assert report["ptrace_attach"] == refused
    assert report["process_vm_readv"] == refused
    assert report["threads"] is True
    assert report["subprocess"] == "hi\n"
    assert report["pool_fork"] == report["pool_spawn"] == [1, 2, 3]


def test_the_filter_is_a_bpf_program_handed_to_bubblewrap(settings):
    program = seccomp.program()
    assert program and len(program) % 8 == 0  # struct sock_filter: 8 bytes per instruction
    path = seccomp.filter_path()
    assert path.read_bytes() == program and path.stat().st_mode & 0o077 == 0
    argv = sandbox.bwrap_argv(bwrap="bwrap", command=["true"], cwd="/", writable=[], seccomp_fd=seccomp.FD,
                              tmp_size=1 << 20, shm_size=1 << 19)
    assert argv[argv.index("--seccomp") + 1] == str(seccomp.FD)
    assert argv[argv.index("/tmp") - 2: argv.index("/tmp")] == ["--tmpfs"] or "--size" in argv
    text = " ".join(argv)
    assert f"--size {1 << 20} --tmpfs /tmp" in text and f"--size {1 << 19} --tmpfs /dev/shm" in text


def test_the_filter_can_be_turned_off(settings):
    settings.CAIRN = {**settings.CAIRN, "SECCOMP": "off"}
    seccomp.program.cache_clear()
    try:
        assert seccomp.program() is None and seccomp.filter_path() is None
    finally:
        seccomp.program.cache_clear()
