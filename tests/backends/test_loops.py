"""The reconciler loop as the embedded server runs it: in a thread, stopped by an event."""
import socket
import threading
import time

import pytest

from apps.backends.loops import run_reconciler_loop
from apps.clusters.models import Node
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, wait_for

S = WorkloadStatus


@pytest.mark.django_db(transaction=True)
def test_loop_registers_the_node_runs_workloads_and_stops_promptly():
    workload = admitted(spec={"command": ["python", "-c", "print('hi')"], "env": {}})
    stop = threading.Event()
    thread = threading.Thread(target=run_reconciler_loop, args=(stop, 0.1))
    thread.start()
    try:
        wait_for(lambda: type(workload).objects.get(pk=workload.pk).status == S.SUCCEEDED, what="the job to finish")
        assert Node.objects.filter(name=socket.gethostname(), cluster__backend="local").exists()
    finally:
        stop.set()
        started = time.monotonic()
        thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - started < 1.0
