"""Limits of a local replica as a whole, with real processes (issue 44: a 512Mi job held 2.4 GiB in
five processes, /tmp and /dev/shm were unbounded, nothing limited processes or the work folder).

This host has no delegated cgroup v2 memory controller, so the watchdog (limits.py) is what
these tests exercise; the cgroup path is only checked for what it writes."""
import errno
import json
import os
import time

import psutil
import pytest

from apps.backends.local import limits, startup
from apps.backends.local.limits import DiskUsage, Watchdog
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, gone, reconcile_until, replica_processes, wait_for

S = WorkloadStatus
MiB = 1024 * 1024

pytestmark = pytest.mark.django_db(transaction=True)

# Five processes, each taking 400 MiB in 40 MiB steps (touched: bytes of b"x"): 2 GiB together,
# though each stays under its own RLIMIT_DATA backstop (2 GiB for a 512Mi replica).
FIVE_HOGS = """
import multiprocessing, time

def hog():
    held = []
    for _ in range(10):
        held.append(b"x" * (40 << 20))
        time.sleep(0.1)
    time.sleep(60)

if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    workers = [multiprocessing.Process(target=hog) for _ in range(5)]
    for w in workers:
        w.start()
    print("hogging", flush=True)
    for w in workers:
        w.join()
    print("all held", flush=True)
"""

FILL_TMP = """
import errno, os
report = {}
for path in ("/tmp", "/dev/shm"):
    st = os.statvfs(path)
    report[path] = st.f_blocks * st.f_frsize
written = 0
try:
    with open("/tmp/fill", "wb") as f:
        chunk = b"x" * (16 << 20)
        while written < 2 << 30:
            f.write(chunk)
            f.flush()
            written += len(chunk)
except OSError as exc:
    report["error"] = exc.errno
os.unlink("/tmp/fill")
report["written"] = written
print("TMP " + __import__("json").dumps(report), flush=True)
"""

FORKS = """
import os, sys, time
started = 0
try:
    for _ in range(1000):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
except OSError as exc:
    print(f"fork failed: errno {exc.errno} after {started}", flush=True)
    sys.exit(3)
print(f"started {started}", flush=True)
time.sleep(30)
"""

FILL_WORK = """
import time
with open("big.bin", "wb") as f:
    for _ in range(12):
        f.write(b"x" * (8 << 20))
        f.flush()
print("written", flush=True)
time.sleep(60)
"""


def _failed_with(workload, reason: str, timeout: float = 30.0):
    workload = reconcile_until(workload, {S.FAILED, S.SUCCEEDED}, timeout=timeout)
    assert workload.status == S.FAILED, (workload.status_reason, workload.status_message)
    assert workload.status_reason == reason, (workload.status_reason, workload.status_message)
    assert reason in workload.status_message
    return workload


def test_a_512mi_job_that_holds_2gib_in_five_processes_is_stopped_as_out_of_memory(script):
    workload = admitted(memory_mb=512, spec={"command": ["python", script(FIVE_HOGS)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    wait_for(lambda: replica_processes(workload), what="the replica")
    processes = replica_processes(workload)
    started = time.monotonic()
    workload = _failed_with(workload, limits.OUT_OF_MEMORY)
    assert time.monotonic() - started < 20
    assert "more than its limit of 512 MiB" in workload.status_message
    assert "all held" not in workload_log_read(workload=workload)
    assert wait_for(lambda: gone(processes), timeout=10, what="every process of the replica to be gone")
    event = workload.events.filter(to_status=S.FAILED).get()
    assert event.reason == limits.OUT_OF_MEMORY and event.type == "Warning"


def test_tmp_and_dev_shm_are_sized_from_the_memory_request(script):
    workload = admitted(memory_mb=512, spec={"command": ["python", script(FILL_TMP)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload = reconcile_until(workload, {S.SUCCEEDED, S.FAILED}, timeout=60)
    line = next(ln for ln in workload_log_read(workload=workload).splitlines() if ln.startswith("TMP "))
    report = json.loads(line.removeprefix("TMP "))
    assert report["/tmp"] == 512 * MiB and report["/dev/shm"] == 256 * MiB
    assert report["error"] == errno.ENOSPC and report["written"] <= 512 * MiB


def test_tmp_size_setting(script, settings):
    settings.CAIRN = {**settings.CAIRN, "TMP_SIZE_MB": 64, "SHM_SIZE_MB": 32}
    workload = admitted(memory_mb=512, spec={"command": ["python", script(FILL_TMP)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload = reconcile_until(workload, {S.SUCCEEDED, S.FAILED}, timeout=60)
    line = next(ln for ln in workload_log_read(workload=workload).splitlines() if ln.startswith("TMP "))
    report = json.loads(line.removeprefix("TMP "))
    assert report["/tmp"] == 64 * MiB and report["/dev/shm"] == 32 * MiB
    assert report["error"] == errno.ENOSPC and report["written"] <= 64 * MiB


def test_a_job_forking_a_thousand_processes_is_stopped_past_the_process_limit(script, settings):
    settings.CAIRN = {**settings.CAIRN, "PROCESS_LIMIT": 100}
    workload = admitted(memory_mb=1024, spec={"command": ["python", script(FORKS)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload = _failed_with(workload, limits.PROCESS_LIMIT_EXCEEDED)
    assert "more than its limit of 100" in workload.status_message


def test_rlimit_nproc_makes_fork_fail_before_the_watchdog_looks(script, settings):
    """RLIMIT_NPROC counts every process (and thread) of the replica's user: the run user's
    processes already running count too."""
    try:
        uid = os.getuid() if os.geteuid() != 0 else __import__("pwd").getpwnam(settings.CAIRN["RUN_USER"]).pw_uid
    except KeyError:
        pytest.skip("no run user")
    running = sum(p.info["num_threads"] or 0 for p in psutil.process_iter(["uids", "num_threads"])
                  if p.info["uids"] and p.info["uids"].real == uid)
    settings.CAIRN = {**settings.CAIRN, "NPROC_LIMIT": running + 400, "PROCESS_LIMIT": 5000}
    workload = admitted(memory_mb=1024, spec={"command": ["python", script(FORKS)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload = reconcile_until(workload, {S.SUCCEEDED, S.FAILED}, timeout=60)
    log = workload_log_read(workload=workload)
    assert workload.exit_code == 3, log
    assert f"fork failed: errno {errno.EAGAIN} after" in log
    assert int(log.split(" after ")[1].split()[0]) < 1000


def test_a_work_folder_over_its_limit_stops_the_job_with_disk_quota_exceeded(script, settings):
    settings.CAIRN = {**settings.CAIRN, "DISK_LIMIT_GB": 64 / 1024}
    workload = admitted(memory_mb=512, spec={"command": ["python", script(FILL_WORK)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload = _failed_with(workload, limits.DISK_QUOTA_EXCEEDED, timeout=40)
    assert "more than the workload's disk limit of 64 MiB" in workload.status_message


def test_a_job_within_its_limits_succeeds(script, settings):
    settings.CAIRN = {**settings.CAIRN, "DISK_LIMIT_GB": 64 / 1024}
    workload = admitted(memory_mb=512, spec={"command": ["python", "-c", (
        "import time; open('small.bin','wb').write(b'x' * (8 << 20)); data = b'y' * (200 << 20); time.sleep(2)"
    )], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload = reconcile_until(workload, {S.SUCCEEDED, S.FAILED}, timeout=60)
    assert workload.status == S.SUCCEEDED, workload.status_message


# -- the pieces -----------------------------------------------------------------------------------

def test_disk_usage_counts_hard_links_once_and_follows_no_symlink(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * MiB)
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c").write_bytes(b"x" * MiB)
    big = tmp_path.parent / f"{tmp_path.name}-outside"
    big.mkdir()
    (big / "huge").write_bytes(b"x" * (8 * MiB))
    os.symlink(big, tmp_path / "link")
    total = DiskUsage([str(tmp_path)]).measure()
    assert 2 * MiB <= total < 3 * MiB


def test_disk_usage_walks_a_slice_at_a_time(tmp_path):
    for i in range(2000):
        (tmp_path / f"f{i}").write_bytes(b"x")
    usage = DiskUsage([str(tmp_path)])
    steps = 0
    while usage.step(0.0) is None:  # one batch of entries per step
        steps += 1
    assert steps > 10


def test_the_watchdog_sums_the_processes_of_a_tree(tmp_path):
    """Three processes of 60 MiB each: over a 150 MiB limit together, under it alone."""
    import subprocess
    import sys

    code = ("import os, sys, time\n"
            "for _ in range(2):\n"
            "    if os.fork() == 0: break\n"
            "data = b'x' * (60 << 20)\n"
            "os.write(1, b'ok\\n')\n"
            "time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.read(9) == b"ok\n" * 3
        assert len(limits.process_tree(proc.pid)) == 3
        watchdog = Watchdog(proc.pid, memory=150 * MiB, period=0.05)
        watchdog.start()
        watchdog.join(timeout=10)
        assert watchdog.reason == limits.OUT_OF_MEMORY
        assert proc.wait(timeout=5) == -9
    finally:
        proc.kill()
        proc.wait()  # no zombie left to the tests that follow (test_sandbox counts them)
        proc.stdout.close()


def test_cgroup_parent_needs_the_memory_controller_delegated(tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("cpu io\n")
    assert not limits.usable_cgroup_parent(str(tmp_path))
    (tmp_path / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    assert limits.usable_cgroup_parent(str(tmp_path))
    assert limits.find_cgroup_parent("off") is None
    assert limits.find_cgroup_parent(str(tmp_path)) == str(tmp_path)


def test_a_replicas_cgroup_gets_its_memory_limit(tmp_path):
    """What the shim writes where cgroup v2 is delegated (a plain folder stands in for cgroupfs)."""
    group = limits.Cgroup(str(tmp_path / "cairn-7-1-0"))
    group.create(memory=512 * MiB, tasks=4096)
    assert (tmp_path / "cairn-7-1-0" / "memory.max").read_text() == str(512 * MiB)
    assert (tmp_path / "cairn-7-1-0" / "memory.oom.group").read_text() == "1"
    assert (tmp_path / "cairn-7-1-0" / "pids.max").read_text() == "4096"
    (tmp_path / "cairn-7-1-0" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_kills() == 1
    # The kernel ended the replica between two looks: the shim's last look still names the reason.
    watchdog = Watchdog(os.getpid(), memory=512 * MiB, cgroup=group)
    watchdog.last_look()
    assert watchdog.reason == limits.OUT_OF_MEMORY and "512 MiB" in watchdog.detail


def test_the_start_up_log_says_how_memory_is_limited(caplog, monkeypatch):
    monkeypatch.setattr(limits, "_cgroup_parent", [None])
    with caplog.at_level("INFO", logger="apps.backends.local.sandbox"):
        startup.log_start_up_warning()
    assert any("replica memory watched every 0.5 s" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(limits, "_cgroup_parent", ["/sys/fs/cgroup/cairn"])
    assert "cgroup v2" in limits.describe() and "/sys/fs/cgroup/cairn" in limits.describe()
