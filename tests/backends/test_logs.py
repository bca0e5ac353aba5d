"""Reading replica logs (following them: tests/workloads/test_log_follow.py)."""

import pytest

from apps.backends.local.paths import replica_log_path
from apps.backends.selectors import workload_log_read
from apps.workloads.choices import WorkloadStatus
from tests.factories import WorkloadFactory

S = WorkloadStatus


def _write(workload, attempt, text, replica=0, mode="a"):
    path = replica_log_path(workload.pk, attempt, replica)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as f:
        f.write(text)


@pytest.mark.django_db
def test_read_latest_attempt_tail_and_missing_files():
    workload = WorkloadFactory(status=S.RUNNING, attempt=2)
    _write(workload, 1, "old\n")
    _write(workload, 2, "".join(f"line {i}\n" for i in range(1, 6)))
    _write(workload, 2, "other replica\n", replica=1)

    assert workload_log_read(workload=workload) == "".join(f"line {i}\n" for i in range(1, 6))
    assert workload_log_read(workload=workload, attempt=1) == "old\n"
    assert workload_log_read(workload=workload, replica=1) == "other replica\n"
    assert workload_log_read(workload=workload, tail=2) == "line 4\nline 5\n"
    assert workload_log_read(workload=workload, tail=0) == ""
    assert workload_log_read(workload=workload, tail=100).count("\n") == 5
    assert workload_log_read(workload=workload, replica=7) == ""
    assert workload_log_read(workload=workload, attempt=9) == ""
    assert workload_log_read(workload=WorkloadFactory()) == ""  # never started


@pytest.mark.django_db
def test_tail_of_a_big_log_without_trailing_newline():
    workload = WorkloadFactory(status=S.RUNNING, attempt=1)
    _write(workload, 1, "".join(f"{i:06d} " + "x" * 100 + "\n" for i in range(5000)) + "progress 10%\rprogress 20%")
    assert workload_log_read(workload=workload, tail=2) == "004999 " + "x" * 100 + "\nprogress 10%\rprogress 20%"
