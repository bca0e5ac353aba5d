"""CAIRN_CHECKPOINT_DIR on the local backend: a real (sandboxed) replica saves a checkpoint with the
SDK, fails, and its next attempt resumes from it; the checkpoint is reported to Cairn."""
import pytest

from apps.backends.local.paths import checkpoint_dir
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.training.models import Checkpoint
from apps.workloads.choices import Kind, WorkloadStatus
from tests.backends.helpers import admitted, reconcile_until
from tests.sdk.test_tracking_roundtrip import Server, _free_port

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cairn_server(tmp_path):
    """A real Cairn server process on the test database (the SDK in the replicas reports to it)."""
    server = Server(tmp_path, _free_port())
    server.start()
    yield server
    server.stop()

RESUME = """
    import os, sys
    import cairn
    from cairn import checkpoint as ckpt
    cairn.init()
    last = ckpt.latest()
    start = last.load()["step"] + 1 if last else 0
    print(f"attempt {os.environ['CAIRN_ATTEMPT']} starts at step {start} in {os.environ['CAIRN_CHECKPOINT_DIR']}")
    for step in range(start, start + 5):
        cairn.log({"loss": 1.0 / (step + 1)}, step=step)
    ckpt.save({"step": step}, step=step)
    cairn.finish()
    sys.exit(3 if os.environ["CAIRN_ATTEMPT"] == "1" else 0)
"""


def test_a_restarted_attempt_resumes_from_the_checkpoint_its_predecessor_saved(script, cairn_server, settings):
    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": cairn_server.url}
    # 1 GiB: the SDK saves with torch when it is installed, and PyPI's torch (the CUDA build) takes
    # ~280 MiB of memory once imported, over the factory's 256 MiB.
    workload = admitted(replicas=1, kind=Kind.TRAINING, max_restarts=1, memory_mb=1024,
                        spec={"command": ["python", script(RESUME)], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=60)
    assert workload.attempt == 2
    first = workload_log_read(workload=workload, replica=0, attempt=1)
    second = workload_log_read(workload=workload, replica=0, attempt=2)
    assert f"attempt 1 starts at step 0 in {checkpoint_dir(workload.pk)}" in first
    assert "attempt 2 starts at step 5" in second, second
    assert sorted(p.name for p in checkpoint_dir(workload.pk).iterdir()) == ["step-00000004", "step-00000009"]
    reported = list(Checkpoint.objects.filter(workload=workload).values_list("attempt", "step"))
    assert reported == [(1, 4), (2, 9)]
    assert workload.events.filter(reason="CheckpointSaved").count() == 2
