"""The sweep driver against the real database and Optuna's RDB storage on it, with the trials'
workloads moved through their lives by hand (tests/sweeps/test_end_to_end.py runs them as real
processes)."""
import json
from datetime import timedelta

import optuna
import pytest
from django.utils import timezone

from apps.sweeps.choices import SweepStatus, TrialStatus
from apps.sweeps.driver import sweep_drive
from apps.sweeps.models import Trial
from apps.sweeps.selectors import best_trial
from apps.sweeps.services import sweep_stop, trial_env_for_attempt
from apps.sweeps.study import param_importances, storage_url, study
from apps.tracking.models import Param, Run
from apps.tracking.services import run_finish
from apps.workloads.choices import WorkloadStatus
from apps.workloads.lifecycle import AllGone, workload_observe
from apps.workloads.models import Workload

from .helpers import finish, log, make_sweep, start

pytestmark = pytest.mark.django_db
S = WorkloadStatus


@pytest.fixture
def setup(project, alice, quota):
    return project, alice


def trials(sweep):
    return list(Trial.objects.filter(sweep=sweep).select_related("workload").order_by("number"))


def test_storage_is_cairns_own_postgresql_database(settings):
    db = settings.DATABASES["default"]
    assert storage_url().startswith("postgresql+psycopg://") and storage_url().endswith(f"/{db['NAME']}")


def test_random_sweep_runs_its_trials_two_at_a_time_and_completes(setup):
    project, alice = setup
    sweep = make_sweep(project, alice)
    sweep_drive(sweep_id=sweep.pk)
    first = trials(sweep)
    assert [t.number for t in first] == [0, 1]  # max_concurrent
    for trial in first:
        w = trial.workload
        assert w.kind == "training" and w.name == f"sw-{trial.number}" and w.priority == 4 and w.status == S.QUEUED
        assert w.spec["env"]["PARAM_LR"] == str(trial.params["lr"])
        assert ("PARAM_MOMENTUM" in w.spec["env"]) == (trial.params["solver"] == "sgd")  # conditional
    sweep_drive(sweep_id=sweep.pk)
    assert len(trials(sweep)) == 2, "no third trial while two hold their places"
    for i, trial in enumerate(first):
        run = start(trial.workload)
        log(run, "val_acc", {1: 0.5, 2: 0.6 + i / 10})
        finish(trial.workload)
    sweep_drive(sweep_id=sweep.pk)
    done = trials(sweep)
    assert [(t.status, t.objective) for t in done[:2]] == [("succeeded", 0.6), ("succeeded", pytest.approx(0.7))]
    assert len(done) == 4
    for i, trial in enumerate(done[2:]):
        run = start(trial.workload)
        log(run, "val_acc", {1: 0.2 + i / 10})
        finish(trial.workload)
    sweep_drive(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.COMPLETED and "All 4 trials" in sweep.status_message
    optuna_study = study(sweep)
    assert [t.state.name for t in optuna_study.trials] == ["COMPLETE"] * 4
    assert optuna_study.best_value == pytest.approx(0.7)
    assert optuna_study.trials[1].intermediate_values == {1: 0.5, 2: pytest.approx(0.7)}
    assert set(param_importances(sweep)) >= {"lr", "solver"}


def test_asha_prunes_a_trial_whose_first_rung_value_is_poor(setup):
    project, alice = setup
    sweep = make_sweep(project, alice, algorithm="asha", max_concurrent=1, max_trials=3,
                       space={"width": {"type": "int", "low": 8, "high": 64}})
    sweep_drive(sweep_id=sweep.pk)
    (good,) = trials(sweep)
    run = start(good.workload)
    log(run, "val_acc", {step: 0.9 for step in range(1, 10)})
    finish(good.workload)
    sweep_drive(sweep_id=sweep.pk)
    poor = trials(sweep)[1]
    run = start(poor.workload)
    log(run, "val_acc", {1: 0.1})
    sweep_drive(sweep_id=sweep.pk)
    poor.refresh_from_db()
    workload = Workload.objects.get(pk=poor.workload_id)
    assert poor.status == TrialStatus.PRUNED and poor.pruned_step == 1 and poor.pruned_rung == 0
    assert workload.status == S.STOPPING and workload.status_reason == "Pruned"
    event = workload.events.filter(reason="Pruned").exclude(to_status="stopping").get()
    assert "rung 0 (step 1)" in event.message and "val_acc = 0.1" in event.message
    # the replicas exit: it ends STOPPED and keeps the reason
    workload_observe(workload=workload, observation=AllGone())
    workload.refresh_from_db()
    assert (workload.status, workload.status_reason) == (S.STOPPED, "Pruned")
    assert len(trials(sweep)) == 2  # its workload held its place until it had exited
    sweep_drive(sweep_id=sweep.pk)
    # Optuna is told once its workload has ended (it might have run to the end meanwhile).
    assert study(sweep).trials[1].state == optuna.trial.TrialState.PRUNED
    assert len(trials(sweep)) == 3  # the pruned trial's place went to the next one


def _asha_with_a_good_first_trial(project, alice):
    sweep = make_sweep(project, alice, algorithm="asha", max_concurrent=1, max_trials=3,
                       space={"width": {"type": "int", "low": 8, "high": 64}})
    sweep_drive(sweep_id=sweep.pk)
    (good,) = trials(sweep)
    run = start(good.workload)
    log(run, "val_acc", {step: 0.9 for step in range(1, 10)})
    finish(good.workload)
    sweep_drive(sweep_id=sweep.pk)
    return sweep, trials(sweep)[1]


def test_a_trial_whose_script_already_finished_is_not_pruned(setup, client_for):
    """Issue 46, item 8: its first steps were poor, but it had run to the end (0.95, better than
    the rest) before the driver read them: not pruned at step 1, completed with its final value."""
    project, alice = setup
    sweep, late = _asha_with_a_good_first_trial(project, alice)
    run = start(late.workload)
    log(run, "val_acc", {1: 0.1, **{step: 0.95 for step in range(2, 11)}})
    run_finish(run=run)  # the SDK marks the run finished as the script exits
    sweep_drive(sweep_id=sweep.pk)
    late.refresh_from_db()
    assert late.status == TrialStatus.RUNNING and late.pruned_step is None
    finish(late.workload)
    sweep_drive(sweep_id=sweep.pk)
    late.refresh_from_db()
    assert (late.status, late.objective) == (TrialStatus.SUCCEEDED, 0.95)
    assert best_trial(sweep).pk == late.pk


def test_a_pruned_trial_that_had_run_to_the_end_counts_as_completed(setup, client_for):
    """The prune's stop came after the script had finished (its run marked finished before the
    stop was asked for): the trial completed, with its final value, and best and importance use it."""
    project, alice = setup
    sweep, late = _asha_with_a_good_first_trial(project, alice)
    run = start(late.workload)
    log(run, "val_acc", {1: 0.1})
    sweep_drive(sweep_id=sweep.pk)
    late.refresh_from_db()
    workload = Workload.objects.get(pk=late.workload_id)
    assert late.status == TrialStatus.PRUNED and workload.status == S.STOPPING
    # Meanwhile the script had logged its last steps and finished, before the stop reached it.
    log(run, "val_acc", {step: 0.95 for step in range(2, 11)})
    run_finish(run=run)
    Run.objects.filter(pk=run.pk).update(finished_at=workload.stop_requested_at - timedelta(seconds=1))
    workload_observe(workload=workload, observation=AllGone())
    sweep_drive(sweep_id=sweep.pk)
    late.refresh_from_db()
    assert (late.status, late.objective, late.pruned_step) == (TrialStatus.SUCCEEDED, 0.95, None)
    assert "ran to the end before the prune at step 1" in late.message
    assert study(sweep).trials[1].state == optuna.trial.TrialState.COMPLETE
    assert best_trial(sweep).pk == late.pk
    body = client_for(alice).get(f"/api/v1/projects/{project.slug}/sweeps/{sweep.pk}/").json()
    assert body["best_trial"]["number"] == late.number and body["best_trial"]["objective"] == 0.95


def _pruned_then_logged_to_the_end(project, alice, *, sigterm_after_the_points: bool):
    """A trial pruned at step 1 whose script meanwhile logged every step up to the last one the
    completed trial reached (9), but was killed while it wrapped up (its run never finished)."""
    sweep, late = _asha_with_a_good_first_trial(project, alice)
    run = start(late.workload)
    log(run, "val_acc", {1: 0.1})
    sweep_drive(sweep_id=sweep.pk)
    workload = Workload.objects.get(pk=late.workload_id)
    assert workload.status == S.STOPPING
    before = timezone.now()
    log(run, "val_acc", {step: 0.96 for step in range(2, 10)})
    # The stop is asked for first; the backend sends SIGTERM a moment later (workload_stop_signal).
    sent = timezone.now() + timedelta(seconds=1) if sigterm_after_the_points else before - timedelta(seconds=1)
    Workload.objects.filter(pk=workload.pk).update(term_sent_at=sent)
    workload.refresh_from_db()
    workload_observe(workload=workload, observation=AllGone())
    run.refresh_from_db()
    assert run.status == "stopped"  # closed by the stop, as a killed script's run is
    sweep_drive(sweep_id=sweep.pk)
    late.refresh_from_db()
    run.refresh_from_db()
    return sweep, late, run


def test_a_trial_killed_by_the_prune_after_reporting_its_final_value_counts_as_completed(setup, client_for):
    """Issue 46, item 8: the prune's SIGTERM arrived after the script had reported the objective at
    its last step: completed with its final value, everywhere (sweep, trials, runs comparison)."""
    project, alice = setup
    sweep, late, run = _pruned_then_logged_to_the_end(project, alice, sigterm_after_the_points=True)
    assert (late.status, late.objective, late.pruned_step) == (TrialStatus.SUCCEEDED, 0.96, None)
    assert "reported its final value before the prune at step 1" in late.message
    assert study(sweep).trials[1].state == optuna.trial.TrialState.COMPLETE
    assert best_trial(sweep).pk == late.pk
    client = client_for(alice)
    base = f"/api/v1/projects/{project.slug}"
    body = client.get(f"{base}/sweeps/{sweep.pk}/").json()
    assert body["best_trial"]["number"] == late.number and body["trials"].get("pruned", 0) == 0
    rows = {t["number"]: t for t in client.get(f"{base}/sweeps/{sweep.pk}/trials/").json()["results"]}
    assert (rows[late.number]["status"], rows[late.number]["pruned_step"]) == ("succeeded", None)
    # The runs comparison tells the same story: the trial's run finished, with the same last value.
    compared = client.get(f"{base}/runs/compare/", {"runs": str(run.pk)}).json()
    assert compared["runs"][0]["status"] == "finished"
    assert compared["summaries"][str(run.pk)]["val_acc"]["last"] == 0.96
    events = Workload.objects.get(pk=late.workload_id).events.filter(reason="TrialCompleted")
    assert events.count() == 1


def test_a_trial_that_logged_on_after_the_prune_signal_stays_pruned(setup):
    """Points logged after SIGTERM was sent come from a script that handled the signal: the prune
    stopped it, whatever it reported while it wound down."""
    project, alice = setup
    sweep, late, run = _pruned_then_logged_to_the_end(project, alice, sigterm_after_the_points=False)
    assert (late.status, late.pruned_step) == (TrialStatus.PRUNED, 1)
    assert run.status == "stopped"
    assert study(sweep).trials[1].state == optuna.trial.TrialState.PRUNED


def test_a_pruned_trial_stopped_before_it_finished_stays_pruned(setup):
    project, alice = setup
    sweep, late = _asha_with_a_good_first_trial(project, alice)
    run = start(late.workload)
    log(run, "val_acc", {1: 0.1})
    sweep_drive(sweep_id=sweep.pk)
    workload = Workload.objects.get(pk=late.workload_id)
    log(run, "val_acc", {2: 0.95})  # logged, then killed by the stop: its run never finished
    workload_observe(workload=workload, observation=AllGone())
    sweep_drive(sweep_id=sweep.pk)
    late.refresh_from_db()
    assert (late.status, late.pruned_step) == (TrialStatus.PRUNED, 1)
    assert study(sweep).trials[1].state == optuna.trial.TrialState.PRUNED


def test_objective_never_logged_fails_the_trial_with_a_clear_message(setup):
    project, alice = setup
    sweep = make_sweep(project, alice, max_concurrent=1, max_trials=1)
    sweep_drive(sweep_id=sweep.pk)
    (trial,) = trials(sweep)
    run = start(trial.workload)
    log(run, "loss", {1: 0.3})
    finish(trial.workload)
    sweep_drive(sweep_id=sweep.pk)
    trial.refresh_from_db()
    assert trial.status == TrialStatus.FAILED
    assert "The objective 'val_acc' was never logged" in trial.message
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.COMPLETED
    assert study(sweep).trials[0].state == optuna.trial.TrialState.FAIL


def test_failed_trials_are_recorded_not_retried(setup):
    project, alice = setup
    sweep = make_sweep(project, alice, max_concurrent=1, max_trials=10)
    for _ in range(3):
        sweep_drive(sweep_id=sweep.pk)
        trial = trials(sweep)[-1]
        start(trial.workload)
        finish(trial.workload, S.FAILED)
    sweep_drive(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    assert [t.status for t in trials(sweep)] == ["failed"] * 3
    assert sweep.status == SweepStatus.FAILED and "The first 3 trials all failed" in sweep.status_message


def test_a_trial_asked_before_a_crash_is_adopted_not_lost_nor_repeated(setup):
    project, alice = setup
    sweep = make_sweep(project, alice, max_concurrent=2, max_trials=2)
    study(sweep).ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
                      "solver": optuna.distributions.CategoricalDistribution(["adam", "sgd"])})
    assert not Trial.objects.filter(sweep=sweep).exists()  # the driver died before writing its row
    sweep_drive(sweep_id=sweep.pk)
    sweep_drive(sweep_id=sweep.pk)
    rows = trials(sweep)
    assert [t.number for t in rows] == [0, 1] and all(t.workload_id for t in rows)
    assert Workload.objects.filter(project=project).count() == 2
    assert len(study(sweep).trials) == 2


def test_a_trial_asked_but_not_fully_suggested_before_a_crash_is_adopted_with_all_its_params(setup):
    """The driver killed between ask() and the last suggest_*: Optuna holds the trial with some of
    its params (here none, and only lr). Adopted, each runs with every param of the space, the
    values already drawn kept."""
    project, alice = setup
    sweep = make_sweep(project, alice, max_concurrent=2, max_trials=2)
    study(sweep).ask()
    lr = study(sweep).ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)}).params["lr"]
    sweep_drive(sweep_id=sweep.pk)
    rows = trials(sweep)
    assert [t.number for t in rows] == [0, 1] and all(t.workload_id for t in rows)
    assert rows[1].params["lr"] == lr
    for trial in rows:
        assert {"lr", "solver"} <= set(trial.params), trial.params
        assert ("momentum" in trial.params) == (trial.params["solver"] == "sgd")
        env = trial.workload.spec["env"]
        assert env["PARAM_LR"] == str(trial.params["lr"]) and env["PARAM_SOLVER"] == trial.params["solver"]
        assert study(sweep).trials[trial.number].params == trial.params
    assert Workload.objects.filter(project=project).count() == 2


def test_a_second_driver_waits_for_the_lease(setup):
    project, alice = setup
    sweep = make_sweep(project, alice)
    assert sweep_drive(sweep_id=sweep.pk, owner="one")
    assert not sweep_drive(sweep_id=sweep.pk, owner="two")
    assert len(trials(sweep)) == 2


def test_stopping_a_sweep_stops_its_running_trials(setup):
    project, alice = setup
    sweep = make_sweep(project, alice)
    sweep_drive(sweep_id=sweep.pk)
    running, queued = (t.workload for t in trials(sweep))
    start(running)
    sweep_stop(sweep=sweep, user=alice)
    running.refresh_from_db()
    queued.refresh_from_db()
    assert running.status == S.STOPPING and queued.status == S.STOPPED
    sweep_drive(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.STOPPING  # its running trial has not exited yet
    workload_observe(workload=running, observation=AllGone())
    sweep_drive(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.STOPPED
    assert [t.status for t in trials(sweep)] == ["stopped", "stopped"]
    assert len(trials(sweep)) == 2


def test_each_attempt_gets_the_params_in_env_and_in_its_run(setup):
    project, alice = setup
    sweep = make_sweep(project, alice, max_trials=1, max_concurrent=1)
    sweep_drive(sweep_id=sweep.pk)
    (trial,) = trials(sweep)
    env = trial_env_for_attempt(workload=trial.workload, attempt=1)
    assert json.loads(env["CAIRN_SWEEP_PARAMS"]) == trial.params and env["CAIRN_TRIAL"] == "0"
    stored = dict(Param.objects.filter(run__workload=trial.workload).values_list("key", "value"))
    assert stored == trial.params


def test_a_trial_stopped_by_a_cairn_shutdown_runs_again_as_the_same_trial(setup):
    from apps.workloads.choices import StopCause
    from apps.workloads.services import workload_transition

    project, alice = setup
    sweep = make_sweep(project, alice, max_trials=1, max_concurrent=1)
    sweep_drive(sweep_id=sweep.pk)
    (trial,) = trials(sweep)
    first = trial.workload
    run = start(first)
    log(run, "val_acc", {1: 0.4})
    sweep_drive(sweep_id=sweep.pk)
    # Ctrl-C of the embedded server: its jobs stop with reason ServerShutdown
    workload_transition(workload_id=first.pk, from_statuses={S.RUNNING}, to_status=S.STOPPING, reason="ServerShutdown",
                        stop_cause=StopCause.SHUTDOWN)
    workload_observe(workload=Workload.objects.get(pk=first.pk), observation=AllGone())
    sweep_drive(sweep_id=sweep.pk)
    (trial,) = trials(sweep)
    assert trial.status == TrialStatus.PENDING and trial.resubmits == 1
    assert trial.workload.name == "sw-0-r1" and trial.workload.status == S.QUEUED
    run = start(trial.workload)
    log(run, "val_acc", {1: 0.5, 2: 0.8})
    finish(trial.workload)
    sweep_drive(sweep_id=sweep.pk)
    (trial,) = trials(sweep)
    sweep.refresh_from_db()
    assert (trial.status, trial.objective, sweep.status) == ("succeeded", 0.8, "completed")
    assert len(study(sweep).trials) == 1


def test_no_trial_starts_once_the_gpu_hour_budget_is_used(project, alice, pool, settings):
    from datetime import timedelta

    from django.utils import timezone

    from apps.sweeps.selectors import gpu_hours_used
    from tests.factories import QuotaFactory

    QuotaFactory(project=project, pool=pool)
    sweep = make_sweep(project, alice, max_trials=None, max_gpu_hours=0.01, max_concurrent=1,
                       template={"command": "python train.py", "resources": {"gpu": 1, "cpu": 1}})
    sweep_drive(sweep_id=sweep.pk)
    (trial,) = trials(sweep)
    run = start(trial.workload)
    Workload.objects.filter(pk=trial.workload_id).update(started_at=timezone.now() - timedelta(minutes=1))
    log(run, "val_acc", {1: 0.5})
    finish(trial.workload)
    assert gpu_hours_used(sweep) == pytest.approx(1 / 60, rel=0.05)  # one GPU for a minute
    sweep_drive(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    assert len(trials(sweep)) == 1
    assert sweep.status == SweepStatus.COMPLETED and "0.01 GPU-hours is used up" in sweep.status_message
