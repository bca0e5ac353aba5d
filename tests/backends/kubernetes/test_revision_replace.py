"""A deployment's revision that drops something (an env var, its GPU, its command) takes it out
of the Deployment's pod template. A strategic-merge patch of the template (what Cairn sent
before) merges env and containers by name and resource maps key by key, so on a real API server
(and on the emulator, which now applies strategic merges as one does) the dropped parts stayed:
the template is now written back whole, with its resourceVersion."""
from apps.deployments.services import deployment_revision_create

from .test_rollouts import NS, deployment, running_deployment, status_of, until


def main_container(obj) -> dict:
    return next(c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == "main")


def test_a_revision_removes_env_gpu_and_command(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool):
    workload, name = running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool,
                                        replicas=1)
    deployment_revision_create(workload=status_of(workload), changes={"env": {"V": "1", "DROP": "me"},
                                                                      "resources": {"gpu_milli": 1000}})
    assert until(reconciler, lambda: "DROP" in str(main_container(deployment(emulator, name))["env"]))
    assert main_container(deployment(emulator, name))["resources"]["limits"]["nvidia.com/gpu"] == "1"
    kubelet.deployment_rolled_out(NS, name)
    assert until(reconciler, lambda: (status_of(workload).runtime.get("main_rollout") or {}).get("revision") == 2
                 and status_of(workload).runtime["main_rollout"]["complete"])

    deployment_revision_create(workload=status_of(workload), changes={
        "env": {"V": "1"}, "command": [], "resources": {"gpu_milli": 0}})
    assert until(reconciler, lambda: deployment(emulator, name)["spec"]["template"]["metadata"]["annotations"][
        "cairn.dev/revision"] == "3")
    container = main_container(deployment(emulator, name))
    names = {e["name"] for e in container["env"]}
    assert "DROP" not in names and "V" in names
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert "command" not in container
