"""What a member's replica can and cannot reach on the machine Cairn runs on (issue: a job read
Cairn's /proc/<pid>/environ, its data folder and other projects' work, and killed their jobs).

Each test runs real replicas through the local backend and lets a probe script inside the
replica try everything an attacker would; the probe prints what worked as one JSON line.
"""
import json
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from apps.backends.local import sandbox, startup
from apps.backends.local.backend import LocalBackend
from apps.backends.local.paths import replica_log_path, work_dir
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, is_replica_command, reconcile_until, replica_processes, wait_for

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _bubblewrap_installed():
    assert shutil.which("bwrap"), "bubblewrap is missing: `make test` installs it (apt-get install bubblewrap)"

PROBE = r"""
import json, os, signal, sys

report = {"uid": os.getuid()}


def attempt(name, action):
    try:
        action()
        report[name] = "allowed"
    except Exception as exc:  # what stopped it
        report[name] = type(exc).__name__


cairn_pid, other_pid = int(sys.argv[1]), int(sys.argv[2])
data_dir, other_work, other_log, checkout, own_work = sys.argv[3:8]

attempt("read_cairn_environ", lambda: open(f"/proc/{cairn_pid}/environ", "rb").read())
attempt("signal_cairn", lambda: os.kill(cairn_pid, 0))
attempt("kill_other_workload", lambda: os.kill(other_pid, signal.SIGKILL))
attempt("read_database_file", lambda: open(os.path.join(data_dir, "cairn.sqlite3"), "rb").read())
attempt("read_other_work", lambda: open(os.path.join(other_work, "secret.txt")).read())
attempt("read_other_log", lambda: open(other_log).read())
attempt("write_other_work", lambda: open(os.path.join(other_work, "planted.txt"), "w").write("x"))
attempt("write_data_dir", lambda: open(os.path.join(data_dir, "planted.txt"), "w").write("x"))
attempt("write_checkout", lambda: open(os.path.join(checkout, "planted.txt"), "w").write("x"))
attempt("write_etc", lambda: open("/etc/planted.txt", "w").write("x"))
attempt("write_own_work", lambda: open(os.path.join(own_work, "result.txt"), "w").write("mine"))
attempt("write_tmp", lambda: open("/tmp/scratch.txt", "w").write("x"))
attempt("import_numpy", lambda: __import__("numpy").ones(3).sum())
attempt("import_sdk", lambda: __import__("cairn"))

# Every environment this process can read: none may hold Cairn's secrets.
leaks = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    if b"DATABASE_URL=" in environ or b"SECRET_KEY=" in environ:
        leaks.append(int(pid))
report["environs_with_secrets"] = leaks
report["visible_pids"] = len([p for p in os.listdir("/proc") if p.isdigit()])
try:
    report["data_dir_listing"] = sorted(os.listdir(data_dir))
except OSError as exc:
    report["data_dir_listing"] = type(exc).__name__
print("PROBE " + json.dumps(report), flush=True)
"""

SLEEPER = """
import time
open("secret.txt", "w").write("project A's secret")
print("A is running", flush=True)
time.sleep(120)
"""


def _report(workload) -> dict:
    line = wait_for(
        lambda: next((ln for ln in workload_log_read(workload=workload).splitlines() if ln.startswith("PROBE ")), None),
        timeout=60, what="the probe's report",
    )
    return json.loads(line.removeprefix("PROBE "))


def _command_pid(workload) -> int:
    return next(p.pid for p in replica_processes(workload) if is_replica_command(p))


@pytest.fixture
def victim(script, settings):
    """Another project's running workload, with a secret in its work folder and in its log."""
    from tests.factories import ProjectFactory

    workload = admitted(project=ProjectFactory(slug="other"), spec={"command": ["python", script(SLEEPER)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    wait_for(lambda: "A is running" in workload_log_read(workload=workload), timeout=60, what="the victim to start")
    return workload


def test_a_members_replica_reaches_nothing_of_cairn_or_other_workloads(script, settings, victim):
    assert sandbox.isolation().level in (sandbox.BWRAP_ROOT, sandbox.BWRAP)
    data_dir = Path(settings.CAIRN_DATA_DIR)
    (data_dir / "cairn.sqlite3").write_text("the database")
    checkout = str(Path(settings.BASE_DIR))
    victim_pid = _command_pid(victim)
    attacker = admitted(spec={"command": [
        "python", script(PROBE), str(os.getpid()), str(victim_pid), str(data_dir), str(work_dir(victim.pk)),
        str(replica_log_path(victim.pk, 1, 0)), checkout, str(work_dir(0)),
    ], "env": {}})
    # The probe writes into its own folder: pass the real one now that the id is known.
    attacker.spec["command"][-1] = str(work_dir(attacker.pk))
    attacker.save(update_fields=["spec"])
    workload_dispatch(workload_id=attacker.pk)
    attacker.refresh_from_db()
    report = _report(attacker)

    assert os.environ.get("DATABASE_URL")  # the test process holds a secret a replica must not read
    assert report["read_cairn_environ"] != "allowed"
    assert report["signal_cairn"] != "allowed"
    assert report["environs_with_secrets"] == []
    assert report["kill_other_workload"] != "allowed"
    assert report["read_database_file"] != "allowed"
    assert report["read_other_work"] != "allowed"
    assert report["read_other_log"] != "allowed"
    for write in ("write_other_work", "write_data_dir", "write_checkout", "write_etc"):
        assert report[write] != "allowed", write
    assert report["data_dir_listing"] in (["workloads"], "FileNotFoundError")
    assert report["visible_pids"] <= 3  # bubblewrap's init, the probe (and the shell, if any)
    # Its normal work still succeeds.
    assert report["write_own_work"] == report["write_tmp"] == "allowed"
    assert report["import_numpy"] == report["import_sdk"] == "allowed"
    assert (work_dir(attacker.pk) / "result.txt").read_text() == "mine"
    assert not (Path("/tmp") / "scratch.txt").exists() or (Path("/tmp") / "scratch.txt").read_text() != "x"
    # The other project's job was not touched.
    assert psutil.pid_exists(victim_pid) and psutil.Process(victim_pid).status() != psutil.STATUS_ZOMBIE
    assert not (work_dir(victim.pk) / "planted.txt").exists()
    assert not (data_dir / "planted.txt").exists()
    assert not (Path(checkout) / "planted.txt").exists()
    if os.geteuid() == 0:
        assert report["uid"] == pwd.getpwnam(sandbox.isolation().user).pw_uid != 0


def test_working_dir_files_written_by_a_replica_belong_to_the_run_user(script):
    workload = admitted(spec={"command": ["python", "-c", "open('out.txt', 'w').write('x')"], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=60)
    owner = (work_dir(workload.pk) / "out.txt").stat().st_uid
    assert owner == (pwd.getpwnam(sandbox.isolation().user).pw_uid if os.geteuid() == 0 else os.geteuid())
    assert oct(replica_log_path(workload.pk, 1, 0).parent.stat().st_mode & 0o777) == "0o700"


def test_no_credential_on_any_replicas_command_line(settings):
    """The notebook's token reaches Jupyter through its environment, never through argv."""
    notebook = admitted(kind="notebook", spec={"env": {}})
    workload_dispatch(workload_id=notebook.pk)
    notebook.refresh_from_db()
    from apps.notebooks.access import runtime_token

    token = runtime_token(notebook)
    assert token
    wait_for(lambda: len(replica_processes(notebook)) > 1, timeout=60, what="JupyterLab to start")
    for proc in psutil.process_iter(["cmdline"]):
        assert token not in " ".join(proc.info["cmdline"] or []), proc


def test_two_hundred_launches_leave_no_zombie(settings):
    """The shim detaches: the process the launcher starts exits at once and is reaped there."""
    workload = admitted(replicas=50, spec={"command": ["true"], "env": {}})
    backend = LocalBackend()
    for attempt in range(1, 5):
        workload.runtime = backend.launch(workload, attempt=attempt)
    me = psutil.Process()

    def zombies() -> list:
        return [p for p in me.children(recursive=True) if p.status() == psutil.STATUS_ZOMBIE]

    assert zombies() == []
    time.sleep(1.0)  # give the replicas time to exit: still nothing may be left unreaped here
    assert zombies() == []
    defunct = [p for p in psutil.process_iter(["status", "ppid"])
               if p.info["status"] == psutil.STATUS_ZOMBIE and p.info["ppid"] == me.pid]
    assert defunct == []


DRIVER = r"""
import json, os, subprocess, sys
# Plays Cairn running as an unprivileged user: its environment holds the secret; the replica
# is started through the shim with a clean environment, as the local backend does.
shim, exit_file, log = sys.argv[1:4]
argv = json.loads(sys.argv[4]) + [str(os.getpid())]
with open(log, "ab") as out:
    subprocess.run([sys.executable, "-I", "-S", shim, "--sandboxed", exit_file, "--", *argv],
                   env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"}, stdout=out, stderr=subprocess.STDOUT, check=False)
"""

NONROOT_PROBE = r"""
import json, os, sys
cairn_pid = int(sys.argv[-1])
report = {}
for name, action in {
    "read_cairn_environ": lambda: open(f"/proc/{cairn_pid}/environ", "rb").read(),
    "signal_cairn": lambda: os.kill(cairn_pid, 0),
    "read_cairn_file": lambda: open(sys.argv[1]).read(),
    "write_own_work": lambda: open("result.txt", "w").write("mine"),
}.items():
    try:
        action()
        report[name] = "allowed"
    except Exception as exc:
        report[name] = type(exc).__name__
print("PROBE " + json.dumps(report), flush=True)
"""


def test_a_non_root_cairn_with_bubblewrap_keeps_its_secrets(tmp_path):
    """Cairn not running as root: replicas keep its uid, so only the sandbox stands between them.
    As root, the test plays that Cairn as the run user; not as root, it plays it as itself."""
    user = sandbox._run_user() if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    home = tmp_path / "nonroot"
    (home / "data").mkdir(parents=True)
    (home / "work").mkdir()
    secret = home / "data" / "secret.txt"
    secret.write_text("Cairn's own file")
    shutil.copy(Path(sandbox.__file__).with_name("shim.py"), home / "shim.py")
    (home / "work" / "probe.py").write_text(textwrap.dedent(NONROOT_PROBE))
    (home / "driver.py").write_text(DRIVER)
    if os.geteuid() == 0:
        for path in (tmp_path, home, home / "data", home / "work", secret, home / "shim.py", home / "driver.py"):
            os.chown(path, user.pw_uid, user.pw_gid)
        for parent in tmp_path.parents:
            if parent != Path("/"):
                parent.chmod(parent.stat().st_mode | 0o001)  # let the user pass through pytest's folders
    argv = sandbox.bwrap_argv(
        bwrap=shutil.which("bwrap"), command=["/usr/bin/python3", "probe.py", str(secret)],
        cwd=str(home / "work"), writable=[str(home / "work")],
    )
    become = ["runuser", "-u", user.pw_name, "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*become, "env", "SECRET_KEY=not-for-replicas", "DATABASE_URL=postgres://x",
         "/usr/bin/python3", str(home / "driver.py"), str(home / "shim.py"), str(home / "exit.json"),
         str(home / "replica.log"), json.dumps(argv)],
        check=True, timeout=60,
    )
    log = (home / "replica.log").read_text()
    report = json.loads(next(ln for ln in log.splitlines() if ln.startswith("PROBE ")).removeprefix("PROBE "))
    assert report == {
        "read_cairn_environ": "FileNotFoundError", "signal_cairn": "ProcessLookupError",
        "read_cairn_file": "FileNotFoundError", "write_own_work": "allowed",
    }, log
    assert json.loads((home / "exit.json").read_text())["exit_code"] == 0
    assert (home / "work" / "result.txt").read_text() == "mine"


def test_bwrap_argv_hides_the_data_folder_inside_an_allowed_path():
    argv = sandbox.bwrap_argv(
        bwrap="bwrap", command=["python"], cwd="/srv/checkout", readable=["/opt/python"],
        shared=["/srv/checkout"], hidden=["/srv/checkout/var"], writable=["/srv/checkout/var/workloads/7/work"],
    )
    text = " ".join(argv)
    assert "--bind /srv/checkout /srv/checkout" in text
    # The data folder is covered by an empty tmpfs after the checkout is mounted, and the
    # workload's own folder is mounted on top of that.
    assert text.index("--bind /srv/checkout ") < text.index("--tmpfs /srv/checkout/var") < text.index(
        "--bind /srv/checkout/var/workloads/7/work")
    assert "--ro-bind /opt/python /opt/python" in text
    assert argv[-2:] == ["--", "python"]


def test_run_user_mode_refuses_a_python_the_run_user_cannot_reach(monkeypatch, tmp_path):
    locked = tmp_path / "locked"
    (locked / "bin").mkdir(parents=True)
    locked.chmod(0o700)
    monkeypatch.setattr(sys, "executable", str(locked / "bin" / "python"))
    iso = sandbox.Isolation(sandbox.RUN_USER, uid=65534, gid=65534, user="nobody")
    problem = sandbox.unreachable_python(iso)
    assert problem and str(locked) in problem and "bubblewrap" in problem


def test_the_reconciler_log_says_when_replicas_are_not_isolated(monkeypatch, caplog):
    """Server mode has no `make run` banner: the reconciler's start-up log line says it."""
    monkeypatch.setattr(sandbox, "isolation", lambda: sandbox.Isolation(sandbox.NONE, problem="bubblewrap (bwrap) is not installed"))
    with caplog.at_level("INFO", logger="apps.backends.local.sandbox"):
        startup.log_start_up_warning()
    warning = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warning) == 1 and "NOT isolated" in warning[0].getMessage()
    assert "bubblewrap (bwrap) is not installed" in warning[0].getMessage()


@pytest.mark.django_db
def test_the_reconciler_loop_logs_the_isolation_at_start(caplog):
    import threading

    from apps.backends.loops import run_reconciler_loop

    stop = threading.Event()
    stop.set()  # start, log, and leave at once
    with caplog.at_level("INFO"):
        run_reconciler_loop(stop, 0.1)
    assert any(r.name == "apps.backends.local.sandbox" and "local backend:" in r.getMessage() for r in caplog.records)
