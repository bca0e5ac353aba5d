"""Sweeps end to end with real processes: `manage.py run_embedded` (web, scheduler, reconciler,
in-process tasks and, unless told otherwise, the sweep driver) on the test PostgreSQL; every
trial is a training job run by the local backend as a real process that logs its objective
with the SDK; sweeps are created with the `cairn` CLI.

- a random sweep of 6 trials, 2 at a time, completes, never more than 2 trials at once;
- a sweep's trials never hold more CPU than the project's quota (sampled while it runs);
- ASHA prunes the trials whose first-rung value is poor (they end STOPPED, reason Pruned);
- the driver (`manage.py run_sweeps`, its own process) killed mid-sweep and started again
  continues the sweep without losing or repeating a trial.
"""
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import requests

from tests.e2e.conftest import in_thread
from tests.processes import ROOT, EmbeddedServer, cairn_env, manage, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

PASSWORD = "pw-for-tests-123"  # tests/factories.py

# A trial: logs `score` = its `quality` parameter at each epoch. A poor trial (quality < 0.5) then
# waits, long after its first rung: it can only end early by being pruned.
TRIAL = textwrap.dedent("""
    import json, os, time
    import cairn
    params = json.loads(os.environ["CAIRN_SWEEP_PARAMS"])
    assert os.environ["PARAM_QUALITY"] == str(params["quality"])
    cairn.init(system_metrics=False)
    epochs, pause = int(os.environ.get("EPOCHS", "3")), float(os.environ.get("PAUSE", "0.2"))
    for epoch in range(1, epochs + 1):
        cairn.log({"score": params["quality"]}, step=epoch)
        time.sleep(pause)
        if os.environ.get("POOR_WAIT") and params["quality"] < 0.5:
            time.sleep(float(os.environ["POOR_WAIT"]))
    assert cairn.finish(timeout=60)
""")


@pytest.fixture(autouse=True)
def _server_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's


def _seed(shared_dir, cpu_milli: int):
    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared_dir)]
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug="e2e")
        MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=cpu_milli, nominal_memory_mb=16384)

    in_thread(seed)


def _server(tmp_path, **extra):
    env = cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded", CAIRN_TASKS_IN_PROCESS="1",
                    CAIRN_SCHEDULER_INTERVAL="0.3", CAIRN_RECONCILER_INTERVAL="0.3", CAIRN_SWEEP_INTERVAL="0.3",
                    CAIRN_STOP_GRACE_SECONDS="3", **extra)
    return env, EmbeddedServer(env, log=tmp_path / "server.log")


def _cli(server, tmp_path, *args: str) -> subprocess.CompletedProcess:
    """The `cairn` CLI, logged in as erin (its config file in tmp_path)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CAIRN_CONFIG": str(tmp_path / "cli.json"),
           "CAIRN_URL": server.url, "CAIRN_PROJECT": "e2e"}
    if not (tmp_path / "cli.json").exists():
        login = subprocess.run([sys.executable, "-m", "cairn", "login", "-u", "erin", "--password-stdin"],
                               input=PASSWORD + "\n", env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert login.returncode == 0, login.stderr
    return subprocess.run([sys.executable, "-m", "cairn", *args], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def _sweep_file(tmp_path, shared_dir, *, name, algorithm="random", max_trials, max_concurrent, extra="",
                env="", quality="[0.9, 0.2]", seed=2) -> str:
    (shared_dir / "trial.py").write_text(TRIAL)
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""
        name: {name}
        objective: {{metric: score, direction: maximize}}
        algorithm: {algorithm}
        space:
          quality: {{type: categorical, choices: {quality}}}
          width: {{type: int, low: 8, high: 64, log: true}}
        budget: {{max_trials: {max_trials}}}
        max_concurrent: {max_concurrent}
        seed: {seed}
        template:
          command: python {shared_dir / 'trial.py'}
          resources: {{cpu: 0.5, memory: 256Mi}}
          env: {{{env}}}
          max_runtime: 5m
    """) + textwrap.dedent(extra))
    return str(path)


class Sampler:
    """Samples, every 0.1 s, the trial workloads of a sweep that hold resources (admitted,
    running, stopping): how many, and the CPU they hold."""

    def __init__(self, sweep_name: str):
        self.sweep_name, self.samples, self._stop = sweep_name, [], threading.Event()
        self.thread = threading.Thread(target=lambda: in_thread(self._run), daemon=True)

    def _run(self):
        from django.db.models import Sum

        from apps.workloads.choices import ACTIVE
        from apps.workloads.models import Workload

        while not self._stop.is_set():
            held = Workload.objects.filter(sweep_trial__sweep__name=self.sweep_name, status__in=ACTIVE)
            queued = Workload.objects.filter(sweep_trial__sweep__name=self.sweep_name, status="queued")
            self.samples.append((held.count(), held.aggregate(cpu=Sum("cpu_milli"))["cpu"] or 0,
                                 list(queued.values_list("waiting_on", flat=True))))
            time.sleep(0.1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(10)


def _sweep(name):
    def read():
        from apps.sweeps.models import Sweep

        sweep = Sweep.objects.get(name=name)
        trials = list(sweep.trials.select_related("workload").order_by("number"))
        return sweep, trials
    return in_thread(read)


def _wait_ended(name, timeout):
    def ended():
        sweep, _ = _sweep(name)
        return sweep.status in ("completed", "stopped", "failed")
    try:
        wait_for(ended, timeout=timeout, interval=0.5, message=f"sweep {name} to end")
    except AssertionError as exc:  # say where it stands
        sweep, trials = _sweep(name)
        raise AssertionError(f"{exc}: sweep {sweep.status} ({sweep.status_message}), trials " + "; ".join(
            f"#{t.number} {t.status} told={t.told} workload={t.workload_id}:"
            f"{t.workload.status if t.workload else None} {t.message}" for t in trials)) from None
    return _sweep(name)


def _not_succeeded(tmp_path, trials) -> str:
    """Each trial that did not succeed: its message, then the exit status and the last lines of
    each replica log of its workload (the replica's own reason; tmp_path is not kept in CI)."""
    out = []
    for trial in trials:
        if trial.status == "succeeded":
            continue
        out.append(f"trial #{trial.number} {trial.status}: {trial.message}")
        if trial.workload_id is None:
            continue
        for log in sorted((tmp_path / "data" / "workloads" / str(trial.workload_id)).glob("attempt-*/replica-*.log")):
            exit_file = log.with_suffix(".exit")
            exit_text = exit_file.read_text(errors="replace").strip() if exit_file.exists() else "no exit file"
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            out.append(f"--- {log.parent.name}/{log.name} ({exit_text}):\n{tail}")
    return "\n".join(out)


def test_random_sweep_of_six_trials_two_at_a_time_completes(tmp_path, shared_dir, settings):
    _seed(shared_dir, cpu_milli=4000)
    _, server = _server(tmp_path)
    try:
        spec = _sweep_file(tmp_path, shared_dir, name="rand", max_trials=6, max_concurrent=2,
                           quality="[0.9, 0.5, 0.7]")
        with Sampler("rand") as sampler:
            created = _cli(server, tmp_path, "sweep", "create", spec)
            assert created.returncode == 0, created.stderr
            assert "Created sweep rand" in created.stdout
            sweep, trials = _wait_ended("rand", timeout=200)
        assert sweep.status == "completed", sweep.status_message
        assert [t.number for t in trials] == list(range(6))
        assert [t.status for t in trials] == ["succeeded"] * 6, _not_succeeded(tmp_path, trials)
        assert all(t.objective == t.params["quality"] for t in trials)
        assert all(t.workload.status == "succeeded" and t.workload.priority == 4 for t in trials)
        assert max(n for n, _, _ in sampler.samples) == 2, "two trials ran at once, never more"
        shown = _cli(server, tmp_path, "sweep", "show", "rand")
        assert shown.returncode == 0, shown.stderr
        assert "completed" in shown.stdout and "Best: trial" in shown.stdout
        listed = _cli(server, tmp_path, "sweep", "ls", "--json")
        (row,) = json.loads(listed.stdout)
        assert row["trials"] == {"succeeded": 6} and row["best_trial"]["objective"] == max(
            t.objective for t in trials)
        # the runs hold the params, for the comparison view
        token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                              timeout=10).json()["token"]
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        api = f"{server.url}/api/v1/projects/e2e/sweeps/{sweep.pk}/"
        rows = http.get(f"{api}trials/", timeout=10).json()["results"]
        runs = ",".join(str(r["run"]) for r in rows)
        compared = http.get(f"{server.url}/api/v1/projects/e2e/runs/compare/", params={"runs": runs}, timeout=10)
        assert compared.status_code == 200, compared.text
        # the first importance in a process imports Optuna's estimators: seconds on a busy machine
        importance = http.get(f"{api}importance/", timeout=90).json()
        assert importance["completed_trials"] == 6 and set(importance["importances"]) <= {"quality", "width"}
    finally:
        server.stop()


def test_trials_never_hold_more_than_the_project_quota(tmp_path, shared_dir, settings):
    _seed(shared_dir, cpu_milli=1000)  # room for two trials of 0.5 CPU, though 4 may run at once
    _, server = _server(tmp_path)
    try:
        spec = _sweep_file(tmp_path, shared_dir, name="quota", max_trials=4, max_concurrent=4, env='PAUSE: "0.5"')
        with Sampler("quota") as sampler:
            assert _cli(server, tmp_path, "sweep", "create", spec).returncode == 0
            sweep, trials = _wait_ended("quota", timeout=200)
        assert sweep.status == "completed" and [t.status for t in trials] == ["succeeded"] * 4
        assert sampler.samples and max(cpu for _, cpu, _ in sampler.samples) <= 1000
        waited = {kind for _, _, queued in sampler.samples for kind in queued}
        assert any(kind.startswith("quota") for kind in waited), waited  # the scheduler held the others back
    finally:
        server.stop()


def test_asha_prunes_the_poor_trials(tmp_path, shared_dir, settings):
    _seed(shared_dir, cpu_milli=4000)
    _, server = _server(tmp_path)
    try:
        # seed 2 draws quality 0.9, 0.2, 0.9, 0.2 (Optuna's RandomSampler, pinned); a poor trial
        # waits two minutes after each epoch, so only pruning can end it within the test.
        spec = _sweep_file(tmp_path, shared_dir, name="asha", algorithm="asha", max_trials=4, max_concurrent=1,
                           env='EPOCHS: "4", POOR_WAIT: "120"', seed=2,
                           extra="early_stopping: {min_resource: 1, reduction_factor: 3}\n")
        assert _cli(server, tmp_path, "sweep", "create", spec).returncode == 0
        sweep, trials = _wait_ended("asha", timeout=200)
        assert sweep.status == "completed", sweep.status_message
        qualities = [t.params["quality"] for t in trials]
        assert qualities[0] == 0.9 and 0.2 in qualities
        for trial in trials:
            if trial.params["quality"] == 0.2:
                assert trial.status == "pruned" and trial.pruned_rung == 0 and trial.pruned_step == 1, trial.message
                assert (trial.workload.status, trial.workload.status_reason) == ("stopped", "Pruned")
                event = in_thread(lambda t=trial: t.workload.events.filter(reason="Pruned", to_status="").get())
                assert "rung 0 (step 1)" in event.message and "score = 0.2" in event.message
            else:
                assert trial.status == "succeeded" and trial.objective == 0.9
        shown = _cli(server, tmp_path, "sweep", "show", "asha")
        assert "pruned at rung 0 (step 1)" in shown.stdout
    finally:
        server.stop()


def test_driver_killed_mid_sweep_continues_without_losing_or_repeating_a_trial(tmp_path, shared_dir, settings):
    _seed(shared_dir, cpu_milli=4000)
    env, server = _server(tmp_path, CAIRN_SWEEP_DRIVER_EMBEDDED="0", CAIRN_SWEEP_LEASE_SECONDS="2")
    driver = manage("run_sweeps", "--interval", "0.3", env={**env, "CAIRN_SWEEP_LEASE_SECONDS": "2"},
                    log=tmp_path / "driver-1.log")
    try:
        spec = _sweep_file(tmp_path, shared_dir, name="restart", max_trials=6, max_concurrent=2,
                           env='PAUSE: "0.5"', quality="[0.9, 0.5, 0.7]")
        assert _cli(server, tmp_path, "sweep", "create", spec).returncode == 0

        def some_done_some_running():
            _, trials = _sweep("restart")
            return (any(t.status == "succeeded" for t in trials)
                    and any(t.workload and t.workload.status == "running" for t in trials))
        wait_for(some_done_some_running, timeout=120, interval=0.2, message="a trial done and one running")
        driver.stop(signal.SIGKILL)  # no clean shutdown: whatever it was doing is cut off
        _, before = _sweep("restart")
        assert len(before) < 6
        time.sleep(1.0)
        driver = manage("run_sweeps", "--interval", "0.3", env={**env, "CAIRN_SWEEP_LEASE_SECONDS": "2"},
                        log=tmp_path / "driver-2.log")
        sweep, trials = _wait_ended("restart", timeout=200)
        assert sweep.status == "completed", sweep.status_message
        assert [t.number for t in trials] == list(range(6)), "no trial lost, none repeated"
        assert [t.status for t in trials] == ["succeeded"] * 6, _not_succeeded(tmp_path, trials)
        workloads = in_thread(lambda: sorted(
            __import__("apps.workloads.models", fromlist=["Workload"]).Workload.objects.filter(
                project__slug="e2e").values_list("name", flat=True)))
        assert workloads == sorted(f"restart-{n}" for n in range(6)), "one workload per trial"
        from apps.sweeps.study import study
        optuna_trials = in_thread(lambda: study(sweep).trials)
        assert [(t.number, t.state.name) for t in optuna_trials] == [(n, "COMPLETE") for n in range(6)]
    finally:
        driver.stop()
        server.stop()


def test_cairn_restarted_mid_sweep_continues_it_without_losing_or_repeating_a_trial(tmp_path, shared_dir, settings):
    """The whole embedded server (driver included) stopped with Ctrl-C mid-sweep and started again:
    the trial its shutdown stopped runs again as the same trial (a new job, <sweep>-<n>-r1), the
    others are neither lost nor repeated, and the sweep completes."""
    _seed(shared_dir, cpu_milli=4000)
    env, server = _server(tmp_path)
    try:
        # ~20 s a trial. The server stops while a trial that started a moment ago runs: it
        # cannot finish during the shutdown, so the restart must run it again.
        spec = _sweep_file(tmp_path, shared_dir, name="again", max_trials=5, max_concurrent=2,
                           env='EPOCHS: "4", PAUSE: "5.0"', quality="[0.9, 0.5, 0.7]")
        assert _cli(server, tmp_path, "sweep", "create", spec).returncode == 0

        def some_done_one_just_started():
            _, trials = _sweep("again")
            fresh = time.time() - 4
            return (any(t.status == "succeeded" for t in trials)
                    and any(t.workload and t.workload.status == "running" and t.workload.started_at
                            and t.workload.started_at.timestamp() > fresh for t in trials))
        wait_for(some_done_one_just_started, timeout=180, interval=0.2,
                 message="a trial done and one just started")
        server.stop()  # Ctrl-C: its running trials' jobs end STOPPED (ServerShutdown)
        _, before = _sweep("again")
        assert len(before) < 5
        server = EmbeddedServer(env, log=tmp_path / "server-2.log")
        sweep, trials = _wait_ended("again", timeout=200)
        assert sweep.status == "completed", sweep.status_message
        assert [t.number for t in trials] == list(range(5)), "no trial lost, none repeated"
        assert [t.status for t in trials] == ["succeeded"] * 5, _not_succeeded(tmp_path, trials)
        names = in_thread(lambda: sorted(
            __import__("apps.workloads.models", fromlist=["Workload"]).Workload.objects.filter(
                project__slug="e2e").values_list("name", "status")))
        # The trial the shutdown stopped ran again as <name>-r1; its first job is the only one
        # not succeeded (the other running trial may have finished during the shutdown).
        resubmitted = {name.removesuffix("-r1") for name, _ in names if name.endswith("-r1")}
        assert resubmitted, names
        assert all(status == "succeeded" or name in resubmitted for name, status in names), names
        assert sorted(t.workload.name for t in trials) == sorted(
            name for name, status in names if status == "succeeded")
    finally:
        server.stop()


def test_cli_stop_stops_the_running_trials(tmp_path, shared_dir, settings):
    _seed(shared_dir, cpu_milli=4000)
    _, server = _server(tmp_path)
    try:
        # every trial is "poor" and waits two minutes after its first epoch: only a stop ends it
        spec = _sweep_file(tmp_path, shared_dir, name="stopme", max_trials=6, max_concurrent=2,
                           env='POOR_WAIT: "120"', quality="[0.1, 0.2]")
        assert _cli(server, tmp_path, "sweep", "create", spec).returncode == 0

        def two_running():
            _, trials = _sweep("stopme")
            return sum(1 for t in trials if t.workload and t.workload.status == "running") == 2
        wait_for(two_running, timeout=120, interval=0.2, message="two trials running")
        stopped = _cli(server, tmp_path, "sweep", "stop", "stopme")
        assert stopped.returncode == 0, stopped.stderr
        assert "Stopping sweep stopme" in stopped.stdout
        sweep, trials = _wait_ended("stopme", timeout=60)
        assert sweep.status == "stopped" and len(trials) == 2, "no trial started after the stop"
        assert [t.status for t in trials] == ["stopped", "stopped"]
        assert all(t.workload.status == "stopped" for t in trials)
        assert _cli(server, tmp_path, "sweep", "stop", "stopme").returncode != 0  # it has ended: 409
    finally:
        server.stop()
