"""`make run`'s demo data: an admin, a demo project with quota on the local pool, an example job."""
from io import StringIO
from pathlib import Path

import psutil
from django.core.management import call_command

from apps.accounts.models import User
from apps.clusters.models import ResourcePool
from apps.quotas.models import Quota
from apps.scheduling.services import scheduling_cycle
from apps.sweeps.driver import sweep_drive
from apps.workloads.models import Workload
from cairn.sweepspec import load_sweep_file


def test_seed_demo_creates_the_demo_and_is_idempotent(db, settings, monkeypatch):
    monkeypatch.delenv("CAIRN_ADMIN_PASSWORD", raising=False)
    out = StringIO()
    call_command("seed_demo", stdout=out)
    password = (settings.CAIRN_DATA_DIR / "admin-password").read_text().strip()
    assert f"password '{password}'" in out.getvalue()
    admin = User.objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser and admin.check_password(password)
    quota = Quota.objects.get(project__slug="demo")
    assert quota.pool.name == "local" and quota.nominal_cpu_milli > 0
    # round figures (whole cores, whole GiB), which the admin's form shows and saves as they are
    assert quota.nominal_cpu_milli % 1000 == 0 and quota.nominal_memory_mb % 1024 == 0
    assert quota.nominal_memory_mb <= quota.pool.nodes.get().memory_mb_allocatable
    job = Workload.objects.get(project__slug="demo")
    assert (job.name, job.kind, job.replicas, job.status) == ("example-train", "training", 2, "queued")
    assert job.spec["command"][-1].endswith("examples/train.py")

    call_command("seed_demo", stdout=StringIO())  # a second `make run` adds nothing and keeps the login
    assert Workload.objects.count() == 1 and Quota.objects.count() == 1 and User.objects.count() == 1
    assert User.objects.get(username="admin").check_password(password)


def test_embedded_mode_allows_the_checkout_as_working_dir(db, settings, client_for):
    """The README tour submits with working_dir: $PWD (the checkout)."""
    settings.EMBEDDED = True
    call_command("seed_demo", stdout=StringIO())
    call_command("seed_demo", stdout=StringIO())
    checkout = str(Path(settings.BASE_DIR).resolve())
    assert ResourcePool.objects.get(name="local").allowed_paths == [checkout]
    client = client_for(User.objects.get(username="admin"))
    url = "/api/v1/projects/demo/training-jobs/"
    body = {"command": "python examples/train.py", "working_dir": checkout}
    assert client.post(url, {**body, "name": "tour"}, format="json").status_code == 201
    data_folder = client.post(url, {**body, "working_dir": str(settings.CAIRN_DATA_DIR)}, format="json")
    assert data_folder.status_code == 400


def test_server_mode_allows_nothing(db, settings):
    settings.EMBEDDED = False
    call_command("seed_demo", stdout=StringIO())
    assert ResourcePool.objects.get(name="local").allowed_paths == []


def test_on_a_two_core_machine_the_example_sweep_runs_beside_the_tours_deployment_and_a_notebook(
        db, settings, monkeypatch, client_for):
    """Issue 46, item 10: the demo quota (the whole machine) and the example sweep are sized so that
    its trials, max_concurrent at a time, are admitted while the README tour's deployment and a
    notebook with the dashboard's defaults run, on the smallest machine the tour is run on."""
    settings.EMBEDDED = True
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 2)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("Memory", (), {"total": 8 * 1024**3})())
    call_command("seed_demo", stdout=StringIO())
    Workload.objects.filter(name="example-train").update(status="succeeded")  # done within the first minute
    client = client_for(User.objects.get(username="admin"))
    api = "/api/v1/projects/demo"
    checkout = str(Path(settings.BASE_DIR).resolve())
    deployment = client.post(f"{api}/deployments/", {  # the README's, as written
        "name": "digits", "command": "python examples/serve_digits.py", "working_dir": checkout,
        "resources": {"cpu": 0.5, "memory": "1Gi"}, "readiness_path": "/healthz"}, format="json")
    assert deployment.status_code == 201, deployment.content
    notebook = client.post(f"{api}/notebooks/", {"name": "lab", "resources": {"cpu": 1, "memory": "1Gi"}},
                           format="json")  # the submit form's defaults
    assert notebook.status_code == 201, notebook.content
    scheduling_cycle()
    example = load_sweep_file(str(Path(settings.BASE_DIR) / "examples" / "sweep_digits.yaml")).body
    example["template"]["working_dir"] = str(Path(checkout) / "examples")
    sweep = client.post(f"{api}/sweeps/", example, format="json")
    assert sweep.status_code == 201, sweep.content
    sweep_drive(sweep_id=sweep.json()["id"])
    scheduling_cycle()
    waiting = {w.name: w.pending_reason for w in Workload.objects.filter(status="queued")}
    assert not waiting, waiting
    trials = Workload.objects.filter(name__startswith="digits-mlp-", status="admitted")
    assert trials.count() == example["max_concurrent"] == 2
