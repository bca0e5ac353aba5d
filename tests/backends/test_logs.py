"""Reading and following replica logs."""
import threading
import time

import pytest
from django.db import connection

from apps.backends.local.paths import replica_log_path
from apps.backends.selectors import workload_log_follow, workload_log_read
from apps.workloads.choices import WorkloadStatus
from apps.workloads.services import workload_transition
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


@pytest.mark.django_db(transaction=True)
def test_follow_yields_new_text_across_a_restart_and_ends_when_terminal():
    workload = WorkloadFactory(status=S.RUNNING, attempt=1)
    _write(workload, 1, "a1\na2\na3\n")

    def writer():
        try:
            time.sleep(0.2)
            _write(workload, 1, "a4\n")
            time.sleep(0.2)
            _write(workload, 2, "b1\n")  # a restart: the new attempt's log, then the attempt number
            type(workload).objects.filter(pk=workload.pk).update(attempt=2)
            time.sleep(0.2)
            _write(workload, 2, "b2 ünïcode\n")
            workload_transition(workload_id=workload.pk, to_status=S.SUCCEEDED, reason="Succeeded", exit_code=0)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    chunks = list(workload_log_follow(workload=workload, tail=1, poll_seconds=0.05))
    thread.join()
    assert "".join(chunks) == "a3\na4\nb1\nb2 ünïcode\n"


@pytest.mark.django_db
def test_follow_of_a_finished_workload_returns_its_log():
    workload = WorkloadFactory(status=S.FAILED, attempt=1)
    _write(workload, 1, "only\n")
    assert "".join(workload_log_follow(workload=workload, poll_seconds=0.01)) == "only\n"
    assert "".join(workload_log_follow(workload=workload, attempt=3, poll_seconds=0.01)) == ""
