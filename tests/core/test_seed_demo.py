"""`make run`'s demo data: an admin, a demo project with quota on the local pool, an example job."""
from io import StringIO

from django.core.management import call_command

from apps.accounts.models import User
from apps.quotas.models import Quota
from apps.workloads.models import Workload


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
