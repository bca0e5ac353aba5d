"""Conditions follow the Kubernetes convention (issue 46, item 2): each attempt starts from fresh
conditions, and every condition says which attempt it describes (`attempt`, `observedGeneration`).
A notebook stopped and started again must not keep the last attempt's `Finished` or its
`Admitted` time."""
from apps.notebooks.services import notebook_start
from apps.workloads.choices import StopCause, WorkloadStatus
from apps.workloads.lifecycle import AllGone, AttemptFailed, workload_locked, workload_observe
from apps.workloads.services import workload_submit, workload_transition

S = WorkloadStatus


def _submit(project, pool, kind="notebook", **fields):
    return workload_submit(project=project, kind=kind, name="nb", pool=pool, spec={"command": "sleep 1"},
                           created_by=None, priority=3, preemptible=True, replicas=1, gpu_milli=0, cpu_milli=1000,
                           memory_mb=1024, **fields)


def _run(workload, attempt):
    workload_transition(workload_id=workload.pk, to_status=S.ADMITTED, reason="Admitted",
                        message=f"Placed for attempt {attempt}.")
    workload_transition(workload_id=workload.pk, to_status=S.RUNNING, reason="Started",
                        message=f"Started attempt {attempt}.", attempt=attempt)


def _by_type(conditions):
    return {c["type"]: c for c in conditions}


def test_a_notebook_started_again_has_only_its_new_attempts_conditions(db, project, pool, quota, bob, client_for):
    notebook = _submit(project, pool)
    _run(notebook, 1)
    first = _by_type(workload_locked(notebook.pk).conditions)
    assert first["Admitted"]["attempt"] == first["Running"]["attempt"] == 1
    # Stopped by a server shutdown: STOPPING, then STOPPED with reason ServerShutdown.
    workload_transition(workload_id=notebook.pk, to_status=S.STOPPING, reason="ServerShutdown",
                        stop_cause=StopCause.SHUTDOWN)
    workload_observe(workload=workload_locked(notebook.pk), observation=AllGone())
    stopped = _by_type(workload_locked(notebook.pk).conditions)
    assert stopped["Finished"]["status"] == "True" and stopped["Finished"]["reason"] == "ServerShutdown"

    notebook_start(workload=workload_locked(notebook.pk), user=bob)
    queued = workload_locked(notebook.pk).conditions
    assert [(c["type"], c["status"], c["attempt"], c["observedGeneration"]) for c in queued] == [
        ("Queued", "True", 2, 2)]
    _run(notebook, 2)

    answer = client_for(bob).get(f"/api/v1/projects/vision/workloads/{notebook.pk}/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "running" and body["attempt"] == 2
    conditions = _by_type(body["conditions"])
    assert set(conditions) == {"Queued", "Admitted", "Running"}  # no Finished, no Stopping of attempt 1
    assert conditions["Running"]["status"] == conditions["Admitted"]["status"] == "True"
    assert conditions["Admitted"]["lastTransitionTime"] > first["Admitted"]["lastTransitionTime"]
    assert {c["attempt"] for c in body["conditions"]} == {2}
    assert {c["observedGeneration"] for c in body["conditions"]} == {2}


def test_a_preempted_workload_back_in_the_queue_starts_afresh(db, project, pool, quota):
    job = _submit(project, pool, kind="training")
    _run(job, 1)
    workload_transition(workload_id=job.pk, to_status=S.STOPPING, reason="Preempted",
                        stop_cause=StopCause.PREEMPTED)
    workload_observe(workload=workload_locked(job.pk), observation=AllGone())
    job.refresh_from_db()
    assert job.status == S.QUEUED
    assert [(c["type"], c["status"], c["reason"], c["attempt"]) for c in job.conditions] == [
        ("Queued", "True", "Requeued", 2)]


def test_a_restart_in_place_sets_running_anew_for_the_new_attempt(db, project, pool, quota):
    job = _submit(project, pool, kind="training", max_restarts=2)
    _run(job, 1)
    before = _by_type(workload_locked(job.pk).conditions)
    workload_observe(workload=workload_locked(job.pk), relaunch=lambda attempt: {"attempt": attempt},
                     observation=AttemptFailed(message="Replica 0 exited with code 3.", exit_code=3))
    job.refresh_from_db()
    assert job.status == S.RUNNING and job.attempt == 2
    after = _by_type(job.conditions)
    assert after["Running"]["reason"] == "Restarting" and after["Running"]["attempt"] == 2
    assert after["Running"]["lastTransitionTime"] > before["Running"]["lastTransitionTime"]
    # Its admission holds across the restart: still True, as observed at attempt 2.
    assert after["Admitted"]["lastTransitionTime"] == before["Admitted"]["lastTransitionTime"]
    assert {c["attempt"] for c in job.conditions} == {2}
