"""Pure mapping of pods and nodes (as the API returns them) to Cairn's view."""
from apps.backends.kubernetes.status import (
    describe_failure,
    job_deadline_exceeded,
    node_inventory,
    pod_view,
    replicas_started_at,
    volcano_state,
)


def pod(phase="Running", *, index="0", state=None, last=None, conditions=None, image="img:1", reason=None):
    status = {"phase": phase, "conditions": conditions or [],
              "containerStatuses": [{"name": "main", "image": image, "ready": phase == "Running",
                                     "state": state or {}, "lastState": last or {}}]}
    if reason:
        status["reason"] = reason
    return {"metadata": {"name": f"cairn-1-1-{index}-abc", "labels": {"cairn.dev/attempt": "1"},
                         "annotations": {"batch.kubernetes.io/job-completion-index": index}}, "status": status}


def test_running_pod_is_alive_and_ready():
    view = pod_view(pod(index="3"))
    assert view.replica == 3 and view.attempt == 1
    assert view.state.alive and view.ready and view.problem is None


def test_succeeded_and_failed_pods_carry_exit_codes():
    ok = pod_view(pod("Succeeded", state={"terminated": {"exitCode": 0, "reason": "Completed"}}))
    assert ok.state.phase == "exited" and ok.state.exit_code == 0 and not ok.state.failed
    bad = pod_view(pod("Failed", state={"terminated": {"exitCode": 143, "reason": "Error"}}))
    assert bad.state.failed and bad.state.exit_code == 143 and bad.state.signal == 15
    assert describe_failure(bad) == "Replica 0 was killed by signal 15 (exit code 143)."


def test_oom_killed_and_evicted_pods_are_described():
    oom = pod_view(pod("Failed", state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))
    assert describe_failure(oom, memory_mb=512) == "Replica 0 was killed for running out of memory (OOMKilled, limit 512Mi)."
    evicted = pod_view(pod("Failed", reason="Evicted"))
    assert evicted.state.phase == "lost"
    assert describe_failure(evicted) == "Replica 0 failed without an exit code (Evicted)."


def test_waiting_reasons_become_problems():
    pull = pod_view(pod("Pending", state={"waiting": {"reason": "ErrImagePull", "message": "not found"}},
                        image="ghcr.io/x:typo"))
    assert (pull.problem.condition, pull.problem.reason) == ("ContainersReady", "ErrImagePull")
    assert pull.problem.message == "Replica 0 cannot pull image 'ghcr.io/x:typo': not found"
    crash = pod_view(pod(state={"waiting": {"reason": "CrashLoopBackOff"}}))
    assert crash.problem.message == "Replica 0 cannot start (CrashLoopBackOff)."
    sched = pod_view(pod("Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                 "message": "0/2 nodes are available"}]))
    assert sched.problem.condition == "PodScheduled" and "0/2 nodes" in sched.problem.message
    assert pod_view(pod("Pending")).problem is None


def test_statefulset_pods_take_their_ordinal_as_replica():
    view = pod_view({"metadata": {"name": "cairn-9-0", "labels": {}}, "status": {"phase": "Running"}})
    assert view.replica == 0 and view.attempt is None


def test_node_inventory_reads_gpus_model_topology_health_and_cordon():
    node = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.product": "A100", "nvidia.com/gpu.memory": "40960",
                                                  "rack": "r1", "topology.kubernetes.io/zone": "z"}},
            "spec": {"unschedulable": True},
            "status": {"capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "4"},
                       "allocatable": {"cpu": "63500m", "memory": "500Gi", "nvidia.com/gpu": "4"},
                       "conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "MemoryPressure", "status": "True"}]}}
    fields = node_inventory(node, gpu_resource="nvidia.com/gpu", gpu_product_label="nvidia.com/gpu.product",
                            topology_keys=["rack"])
    assert (fields["gpu_count"], fields["gpu_model"], fields["gpu_memory_mb"]) == (4, "A100", 40960)
    assert (fields["cpu_milli_capacity"], fields["cpu_milli_allocatable"]) == (64000, 63500)
    assert fields["memory_mb_allocatable"] == 500 * 1024
    assert fields["topology_domain"] == "r1"
    assert fields["health"] == "degraded" and fields["schedulable"] is False
    bare = node_inventory({"metadata": {"name": "m"}}, gpu_resource="nvidia.com/gpu",
                          gpu_product_label="nvidia.com/gpu.product")
    assert bare["health"] == "unknown" and bare["gpu_count"] == 0 and bare["schedulable"] is True


def job(*conditions):
    return {"metadata": {"name": "cairn-1-1"}, "status": {"conditions": list(conditions)}}


def test_a_job_failed_at_its_active_deadline_is_recognised():
    message = "Job was active longer than specified deadline"
    failed = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": message}
    target = {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "message": message}
    assert job_deadline_exceeded(job(failed)) == message
    assert job_deadline_exceeded(job(target)) == message  # pods still terminating (Kubernetes >= 1.31)
    assert job_deadline_exceeded(job({**failed, "message": ""})) == message


def test_other_job_failures_and_states_are_not_a_deadline():
    assert job_deadline_exceeded(None) is None
    assert job_deadline_exceeded(job()) is None
    assert job_deadline_exceeded(job({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"})) is None
    assert job_deadline_exceeded(job({"type": "Failed", "status": "False", "reason": "DeadlineExceeded"})) is None
    assert job_deadline_exceeded(job({"type": "Complete", "status": "True"})) is None


def test_a_crashed_replicas_last_output_is_kept_in_its_failure():
    """terminationMessagePolicy FallbackToLogsOnError puts the log's tail in the terminated
    state's message: the failure keeps it, as the pod (and its log) goes with the attempt."""
    lines = "\n".join(f"line {i}" for i in range(30)) + "\nRuntimeError: CUDA error: out of memory"
    crashed = pod_view(pod("Failed", state={"terminated": {"exitCode": 1, "reason": "Error", "message": lines}}))
    text = describe_failure(crashed)
    assert text.startswith("Replica 0 exited with code 1. Its last output:\n")
    assert text.endswith("RuntimeError: CUDA error: out of memory") and "line 20" not in text  # the last 10 lines
    ok = pod_view(pod("Succeeded", state={"terminated": {"exitCode": 0, "message": "bye"}}))
    assert ok.output == ""


def test_init_container_failures_are_read():
    failing = pod("Pending")
    failing["status"]["initContainerStatuses"] = [{"name": "fill-datasets", "state": {"waiting": {
        "reason": "CrashLoopBackOff", "message": "back-off 40s"}}, "lastState": {"terminated": {
            "exitCode": 75, "message": "cairn cache: the store refused the credentials"}}}]
    view = pod_view(failing)
    assert view.problem.reason == "Init:CrashLoopBackOff"
    assert "init container fill-datasets failed" in view.problem.message
    failed = pod("Failed")
    failed["status"]["initContainerStatuses"] = [{"name": "fill-datasets", "state": {"terminated": {
        "exitCode": 75, "reason": "Error", "message": "no space left"}}}]
    view = pod_view(failed)
    assert view.state.exit_code == 75 and view.reason == "Init:Error"
    assert describe_failure(view) == "Replica 0 exited with code 75 (Init:Error). Its last output:\nno space left"


def test_a_pods_requests_are_counted_as_kube_scheduler_counts_them():
    from apps.backends.kubernetes.status import pod_requests, slim_foreign_pod, usage_by_node

    devices = ("nvidia.com/gpu", "amd.com/gpu")
    foreign = {
        "metadata": {"name": "p", "namespace": "t", "managedFields": [{"big": "x" * 100}], "labels": {"a": "b"}},
        "spec": {"nodeName": "n1", "volumes": [{"name": "v"}], "overhead": {"cpu": "100m"},
                 "initContainers": [
                     {"name": "setup", "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}},
                     {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}],
                 "containers": [
                     {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "2",
                                                                         "memory": "2Gi"}}},
                     {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready"}]},
    }
    # containers 3 CPUs + the sidecar's 0.5 (> the init container's 6? no: 6 wins) + overhead 0.1
    assert pod_requests(foreign, devices) == (2000, 6100, 2560)
    assert slim_foreign_pod(foreign) is True
    assert "managedFields" not in foreign["metadata"] and "volumes" not in foreign["spec"]
    assert pod_requests(foreign, devices) == (2000, 6100, 2560)  # what capacity needs is kept
    done = {"spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "8"}}}]},
            "status": {"phase": "Succeeded"}}
    unbound = {"spec": {"containers": [{"resources": {"requests": {"cpu": "8"}}}]}, "status": {"phase": "Pending"}}
    assert slim_foreign_pod(dict(done)) is False and slim_foreign_pod(dict(unbound)) is False
    other = {"spec": {"nodeName": "n1", "containers": [{"resources": {"limits": {"amd.com/gpu": "1"},
                                                                      "requests": {"cpu": "250m"}}}]},
             "status": {"phase": "Pending"}}
    assert usage_by_node([foreign, done, unbound, other], devices) == {"n1": (3000, 6350, 2560)}


# -- Volcano's PodGroup status (queues.py) -------------------------------------------------------

def _podgroup(phase, *conditions):
    return {"status": {"phase": phase, "conditions": list(conditions)}}


def test_volcano_pending_is_held_with_volcanos_reason():
    state = volcano_state(_podgroup("Pending", {"type": "Unschedulable", "status": "True",
                                                "reason": "NotEnoughResources", "message": "queue full"}))
    assert (state.admitted, state.running, state.reason, state.message) == (False, False, "NotEnoughResources",
                                                                           "queue full")
    assert volcano_state(None, queue="research").message == "Waiting for Volcano queue 'research' to take the gang in."
    assert volcano_state(None).phase == "Pending"


def test_volcano_inqueue_is_admitted_not_running_and_running_is_both():
    inqueue = volcano_state(_podgroup("Inqueue", {"type": "Unschedulable", "status": "False", "reason": "Old"}))
    assert inqueue.admitted and not inqueue.running and inqueue.reason == "Inqueue"  # a False condition says nothing
    for phase in ("Running", "Completed"):
        assert volcano_state(_podgroup(phase)).running
    unknown = volcano_state(_podgroup("Unknown"))
    assert unknown.admitted and not unknown.running and "minMember" in unknown.message


def test_replicas_started_at_is_the_first_running_container():
    def running_pod(phase, started=None, start_time=None, deleting=False):
        status = {"phase": phase, "startTime": start_time}
        if started:
            status["containerStatuses"] = [{"state": {"running": {"startedAt": started}}}]
        return {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}, "status": status}

    assert replicas_started_at([running_pod("Pending")], now=5.0) is None
    assert replicas_started_at([running_pod("Running", deleting=True, started="1970-01-01T00:00:01Z")], now=5.0) is None
    assert replicas_started_at([running_pod("Running", "1970-01-01T00:00:09Z"), running_pod("Running", "1970-01-01T00:00:07Z"),
                                running_pod("Pending")], now=50.0) == 7.0
    assert replicas_started_at([running_pod("Running", start_time="1970-01-01T00:00:03Z")], now=50.0) == 3.0
    assert replicas_started_at([running_pod("Running")], now=50.0) == 50.0
