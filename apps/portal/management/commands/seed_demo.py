"""Demo data for embedded mode: an admin, a demo project with quota on the local pool, an example job.

In embedded mode the local pool also allows the checkout as a working_dir, so the README tour's
`working_dir: $PWD` works; server mode allows no directory unless an admin adds one.
"""
import secrets
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.accounts.models import User
from apps.backends.local import netns, sandbox
from apps.clusters.models import ResourcePool
from apps.clusters.services import local_cluster_register
from apps.projects.choices import Role
from apps.projects.models import Membership, Project
from apps.quotas.models import Quota
from apps.workloads.models import Workload
from apps.workloads.services import workload_submit

EXAMPLE = Path(settings.BASE_DIR) / "examples" / "train.py"


def _admin_password() -> str:
    """Taken from CAIRN_ADMIN_PASSWORD, else generated once and kept in the data directory."""
    import os

    if os.environ.get("CAIRN_ADMIN_PASSWORD"):
        return os.environ["CAIRN_ADMIN_PASSWORD"]
    path = Path(settings.CAIRN_DATA_DIR) / "admin-password"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    path.write_text(password + "\n")
    path.chmod(0o600)
    return password


def _allow_checkout(pool) -> None:
    """Let jobs of the local pool start in the checkout (the README tour's `working_dir: $PWD`).
    Cairn's data folder stays refused even when it lies inside (var/ by default)."""

    checkout = str(Path(settings.BASE_DIR).resolve())
    pool = ResourcePool.objects.select_for_update().get(pk=pool.pk)
    if checkout not in pool.allowed_paths:
        pool.allowed_paths = [*pool.allowed_paths, checkout]
        pool.save(update_fields=["allowed_paths"])


class Command(BaseCommand):
    help = "Create the demo admin, project, quota and example job (idempotent)."

    def handle(self, *args, **options):

        node = local_cluster_register(isolation=sandbox.isolation().level, network=netns.label())
        password = _admin_password()
        with transaction.atomic():
            admin, created = User.objects.get_or_create(username="admin", defaults={"is_staff": True,
                                                                                     "is_superuser": True})
            if created or not admin.check_password(password):
                admin.set_password(password)
                admin.is_staff = admin.is_superuser = True
                admin.save()
            if settings.EMBEDDED:
                _allow_checkout(node.pool)
            project, _ = Project.objects.get_or_create(slug="demo", defaults={"name": "Demo project"})
            Membership.objects.get_or_create(project=project, user=admin, defaults={"role": Role.OWNER})
            Quota.objects.get_or_create(
                project=project, pool=node.pool,
                defaults={  # the whole machine, in whole cores and whole GiB
                    "nominal_gpu_milli": node.gpu_count * 1000,
                    "nominal_cpu_milli": max(node.cpu_milli_allocatable // 1000, 1) * 1000,
                    "nominal_memory_mb": max(node.memory_mb_allocatable // 1024, 1) * 1024,
                },
            )
            if not Workload.objects.filter(project=project).exists():
                workload_submit(
                    project=project, kind="training", name="example-train", pool=node.pool,
                    spec={"command": ["python", str(EXAMPLE)], "env": {"STEPS": "40"}}, created_by=admin,
                    priority=3, preemptible=True, replicas=2, gpu_milli=0, cpu_milli=500, memory_mb=512,
                )
        self.stdout.write(f"demo ready: user 'admin', password '{password}', project 'demo', pool '{node.pool}'")
