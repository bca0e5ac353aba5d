"""Project volumes in real local replicas: bound at their mount path in the sandbox, read-write or
read-only as the spec asks, and persistent across workloads."""
import pytest

from apps.backends.local import sandbox
from apps.backends.services import workload_dispatch
from apps.storage.models import Volume
from apps.storage.paths import volume_path
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, log_file, reconcile_until

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)

WRITE = """
    import os
    path = os.environ["CAIRN_VOLUME_SHARED_STUFF"]
    print("mounted at", path)
    with open(os.path.join(path, "out.txt"), "w") as f:
        f.write("written by the first job")
"""
READ_ONLY = """
    import os
    path = os.environ["CAIRN_VOLUME_SHARED_STUFF"]
    print("read:", open(os.path.join(path, "out.txt")).read())
    try:
        open(os.path.join(path, "other.txt"), "w")
    except OSError as exc:
        print("write refused:", exc.errno)
"""


@pytest.fixture
def bwrap_only():
    if sandbox.isolation().level not in (sandbox.BWRAP_ROOT, sandbox.BWRAP):
        pytest.skip("mount paths need the bubblewrap sandbox; this host has none (docs/data.md)")


def test_a_volume_is_written_by_one_job_and_read_read_only_by_the_next(script, bwrap_only):
    first = admitted(spec={"command": ["python", script(WRITE)], "env": {},
                           "volumes": [{"name": "shared-stuff", "mount": "/data/shared-stuff", "read_only": False}]})
    Volume.objects.create(project=first.project, name="shared-stuff", size_gb=1)
    workload_dispatch(workload_id=first.pk)
    reconcile_until(first, S.SUCCEEDED)
    assert "mounted at /data/shared-stuff" in log_file(first, attempt=1).read_text()
    assert (volume_path(first.project_id, "shared-stuff") / "out.txt").read_text() == "written by the first job"

    second = admitted(project=first.project, pool=first.pool,
                      spec={"command": ["python", script(READ_ONLY)], "env": {},
                            "volumes": [{"name": "shared-stuff", "mount": "/mnt/in", "read_only": True}]})
    workload_dispatch(workload_id=second.pk)
    reconcile_until(second, S.SUCCEEDED)
    log = log_file(second, attempt=1).read_text()
    assert "read: written by the first job" in log
    assert "write refused: 30" in log  # EROFS
    assert not (volume_path(first.project_id, "shared-stuff") / "other.txt").exists()


def test_a_deleted_volume_fails_the_launch_with_a_reason(script):
    workload = admitted(spec={"command": ["python", script("print(1)")], "env": {},
                              "volumes": [{"name": "gone", "mount": "/data/gone", "read_only": False}]})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.FAILED
    assert "Volume 'gone' no longer exists" in workload.status_message
