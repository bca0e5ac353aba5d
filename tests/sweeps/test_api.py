"""The sweeps API: creation, the 400s of bad input (each with a detail), reads, stop."""
import pytest

from apps.sweeps.driver import sweep_drive
from apps.sweeps.models import Sweep
from tests.factories import SweepFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/projects/vision/sweeps/"
DROP = object()


def body(**overrides):
    data = {
        "name": "digits",
        "template": {"command": "python train.py", "resources": {"cpu": 0.5, "memory": "256Mi"}},
        "space": {"lr": {"type": "float", "low": 0.0001, "high": 0.1, "log": True},
                  "hidden": {"type": "int", "low": 16, "high": 128},
                  "solver": {"type": "categorical", "choices": ["adam", "sgd"]},
                  "momentum": {"type": "float", "low": 0.5, "high": 0.99, "when": {"solver": "sgd"}}},
        "objective": {"metric": "val_acc", "direction": "maximize"},
        "algorithm": "asha",
        "budget": {"max_trials": 6},
        "max_concurrent": 2,
        "priority": "P4",
        "early_stopping": {"min_resource": 2, "reduction_factor": 2},
    }
    data.update(overrides)
    return {key: value for key, value in data.items() if value is not DROP}


def test_member_creates_a_sweep(bob, quota, client_for):
    answer = client_for(bob).post(URL, body(), format="json")
    assert answer.status_code == 201, answer.json()
    data = answer.json()
    assert data["status"] == "running" and data["algorithm"] == "asha" and data["priority"] == "P4"
    assert data["objective"] == {"metric": "val_acc", "direction": "maximize"}
    assert data["budget"] == {"max_trials": 6, "max_gpu_hours": None}
    assert data["early_stopping"] == {"min_resource": 2, "reduction_factor": 2}
    assert [p["name"] for p in data["space"]] == ["lr", "hidden", "solver", "momentum"]  # order kept
    assert data["pool"] == quota.pool.name and data["trials"] == {} and data["best_trial"] is None


def test_grid_budget_is_the_grid_size_at_most(bob, quota, client_for):
    space = {"hidden": {"type": "int", "low": 16, "high": 64, "step": 16},
             "solver": {"type": "categorical", "choices": ["adam", "sgd"]}}
    answer = client_for(bob).post(URL, body(algorithm="grid", space=space, budget={"max_trials": 100},
                                            early_stopping=None) | {}, format="json")
    assert answer.status_code == 400  # early_stopping: null is not a mapping
    data = body(algorithm="grid", space=space, budget={}, early_stopping=DROP)
    answer = client_for(bob).post(URL, data, format="json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["budget"]["max_trials"] == 8


@pytest.mark.parametrize("change, words", [
    ({"space": {}}, "the search space is empty"),
    ({"space": {"lr": {"type": "float", "low": 0.1, "high": 0.01}}}, "space.lr: low (0.1) must be below high"),
    ({"space": {"lr": {"type": "float", "low": 0, "high": 1, "log": True}}}, "a log scale needs low > 0"),
    ({"space": {"lr": {"type": "double", "low": 0, "high": 1}}}, "type must be one of int, float, categorical"),
    ({"space": {"s": {"type": "categorical", "choices": []}}}, "needs a non-empty list of `choices`"),
    ({"space": {"m": {"type": "float", "low": 0, "high": 1, "when": {"solver": "sgd"}}}},
     "'solver' is not a parameter given before 'm'"),
    ({"space": {"n": {"type": "int", "low": 1.5, "high": 4}}}, "space.n.low must be a whole number"),
    ({"budget": {"max_trials": 0}}, "max_trials"),
    ({"budget": {"max_gpu_hours": 0}}, "max_gpu_hours"),
    ({"budget": {}}, "Give a budget: max_trials, max_gpu_hours or both"),
    ({"budget": {"max_gpu_hours": 2}}, "The trials ask for no GPU"),
    ({"objective": {"metric": "val acc!"}}, "is not a metric key"),
    ({"objective": {"metric": "acc", "direction": "up"}}, "direction"),
    ({"algorithm": "grid", "early_stopping": DROP}, "grid search needs a `step` for float parameters"),
    ({"algorithm": "random"}, "Only the asha algorithm stops trials early"),
    ({"template": {"command": "x", "name": "fixed"}}, "template.name: set by the sweep"),
    ({"template": {"command": "x", "env": {"PARAM_LR": "1"}}}, "PARAM_LR is set by the sweep"),
    ({"template": {"resources": {"cpu": 1}}}, "template.command: A training job needs a command"),
    ({"template": {"command": "x", "pool": "nope"}}, "Unknown resource pool 'nope'"),
    ({"name": "Not A Label"}, "name"),
    ({"max_concurrent": 0}, "max_concurrent"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_input_is_a_400_with_a_detail(change, words, bob, quota, client_for):
    answer = client_for(bob).post(URL, body(**change), format="json")
    assert answer.status_code == 400, answer.json()
    data = answer.json()
    assert data["detail"]
    assert words in data["detail"] or words in str(data.get("errors")), data
    assert not Sweep.objects.exists()


def test_the_name_is_unique_in_the_project(bob, quota, client_for):
    assert client_for(bob).post(URL, body(), format="json").status_code == 201
    answer = client_for(bob).post(URL, body(), format="json")
    assert answer.status_code == 409 and "already exists" in answer.json()["detail"]


def test_list_detail_trials_and_stop(bob, quota, client_for, django_assert_max_num_queries):
    created = client_for(bob).post(URL, body(max_concurrent=2), format="json").json()
    sweep_drive(sweep_id=created["id"])
    for i in range(3):
        SweepFactory(project=quota.project, pool=quota.pool, name=f"other-{i}")
    client = client_for(bob)
    with django_assert_max_num_queries(12):
        listed = client.get(URL).json()
    assert listed["count"] == 4
    detail = client.get(f"{URL}{created['id']}/").json()
    assert detail["trials"] == {"pending": 2}
    trials = client.get(f"{URL}{created['id']}/trials/").json()["results"]
    assert [t["number"] for t in trials] == [0, 1]
    assert trials[0]["workload"]["name"] == "digits-0" and trials[0]["status"] == "pending"
    assert client.get(f"{URL}{created['id']}/importance/").json() == {"importances": {}, "completed_trials": 0}
    stopped = client.post(f"{URL}{created['id']}/stop/")
    assert stopped.status_code == 202 and stopped.json()["status"] == "stopping"
    again = client.post(f"{URL}{created['id']}/stop/")
    assert again.status_code == 202
    sweep_drive(sweep_id=created["id"])  # its queued trials stopped at once
    assert client.get(f"{URL}{created['id']}/").json()["status"] == "stopped"
    assert client.post(f"{URL}{created['id']}/stop/").status_code == 409


def test_another_projects_sweep_is_404(bob, quota, client_for):
    other = SweepFactory(name="theirs")  # in another project
    assert client_for(bob).get(f"{URL}{other.pk}/").status_code == 404
    assert client_for(bob).post(f"{URL}{other.pk}/stop/").status_code == 404


def test_a_project_with_a_running_sweep_is_not_deleted(alice, quota, client_for, django_capture_on_commit_callbacks):
    from apps.sweeps.study import study

    sweep = SweepFactory(project=quota.project, pool=quota.pool, name="busy")
    study(sweep)  # Optuna's study, as the driver's first pass makes it
    answer = client_for(alice).delete("/api/v1/projects/vision/")
    assert answer.status_code == 409 and "busy" in answer.json()["detail"]
    Sweep.objects.filter(pk=sweep.pk).update(status="stopped")
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).delete("/api/v1/projects/vision/").status_code == 204
    assert sweep.study_name not in _study_names(), "the project's sweeps took their Optuna studies with them"


def _study_names() -> set[str]:
    import optuna

    from apps.sweeps.study import storage
    return {s.study_name for s in optuna.get_all_study_summaries(storage=storage(), include_best_trial=False)}


def test_delete_is_409_while_running_then_removes_the_sweep_and_its_study_but_keeps_the_jobs(
        alice, bob, vera, charlie, quota, client_for, django_capture_on_commit_callbacks):
    from apps.sweeps.models import Trial
    from apps.tracking.models import Run
    from apps.workloads.models import Workload

    created = client_for(bob).post(URL, body(max_concurrent=2), format="json").json()
    sweep_drive(sweep_id=created["id"])  # two trials asked, their jobs submitted
    sweep = Sweep.objects.get(pk=created["id"])
    workloads = set(Trial.objects.filter(sweep=sweep).values_list("workload_id", flat=True))
    assert len(workloads) == 2 and sweep.study_name in _study_names()
    Run.objects.create(project=quota.project, name="digits-0", workload_id=min(workloads), attempt=1)
    url = f"{URL}{sweep.pk}/"

    answer = client_for(bob).delete(url)
    assert answer.status_code == 409 and "is running; stop it" in answer.json()["detail"]
    client_for(bob).post(f"{url}stop/")
    answer = client_for(bob).delete(url)
    assert answer.status_code == 409 and "is stopping" in answer.json()["detail"]
    sweep_drive(sweep_id=sweep.pk)  # its queued trials stop at once: the sweep ends STOPPED
    assert Sweep.objects.get(pk=sweep.pk).status == "stopped"

    assert client_for(charlie).delete(url).status_code == 404  # outsider
    assert client_for(vera).delete(url).status_code == 403  # a viewer may not
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(bob).delete(url).status_code == 204
    assert not Sweep.objects.filter(pk=sweep.pk).exists() and not Trial.objects.filter(sweep_id=sweep.pk).exists()
    assert sweep.study_name not in _study_names(), "Optuna's study went with the sweep"
    assert set(Workload.objects.filter(pk__in=workloads).values_list("pk", flat=True)) == workloads, "jobs kept"
    assert Run.objects.filter(workload_id=min(workloads)).exists(), "their runs kept"
    assert client_for(bob).delete(url).status_code == 404
