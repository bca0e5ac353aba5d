"""The manifest builders are pure: no cluster, no database. Every object they produce is
validated against the Kubernetes JSON schemas that kubernetes-validate ships in its wheel
(so this works offline), in strict mode (unknown fields are errors)."""
import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest

from apps.backends.kubernetes.manifests import (
    ClusterOptions,
    WorkloadView,
    canary_manifests,
    deployment_layout,
    deployment_strategy,
    namespace_manifest,
    revised_template,
    workload_manifests,
)
from tests.s3emu import s3_server  # noqa: F401 - the S3 emulator fixture

K8S_VERSION = "1.37.0"

# Volcano's PodGroup is a CRD, not in the Kubernetes schemas: check the fields we rely on.
VOLCANO_PODGROUP_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "scheduling.volcano.sh/v1beta1"},
        "kind": {"const": "PodGroup"},
        "spec": {
            "type": "object",
            "required": ["minMember"],
            "additionalProperties": False,
            "properties": {
                "minMember": {"type": "integer", "minimum": 1},
                "queue": {"type": "string"},
                "minResources": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
    },
}


def view(**overrides) -> WorkloadView:
    fields = dict(
        id=42, kind="training", name="resnet", project="vision", attempt=1, replicas=4, gpu_milli=8000,
        cpu_milli=4000, memory_mb=32768, spec={"command": ["python", "train.py"], "env": {"LR": "0.1"}},
    )
    fields.update(overrides)
    return WorkloadView(**fields)


def validate(manifest: dict) -> None:
    if manifest["apiVersion"].startswith("scheduling.volcano.sh/"):
        jsonschema.validate(manifest, VOLCANO_PODGROUP_SCHEMA)
        return
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


def by_kind(manifests: list[dict]) -> dict[str, dict]:
    return {m["kind"]: m for m in manifests}


def pod_template(manifests: list[dict]) -> dict:
    for m in manifests:
        if m["kind"] in ("Job", "StatefulSet", "Deployment"):
            return m["spec"]["template"]
    raise AssertionError("no pod template")


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


VARIANTS = {
    "training-gpu": view(),
    "training-with-run": view(run_env={"CAIRN_RUN_ID": "7", "CAIRN_RUN_TOKEN": "crt_secret"}),
    "notebook-with-run": view(kind="notebook", replicas=1, gpu_milli=0, spec={"env": {}},
                              run_env={"CAIRN_RUN_ID": "7", "CAIRN_RUN_TOKEN": "crt_secret"}),
    "deployment-with-run": view(kind="deployment", replicas=1, gpu_milli=0, spec={"command": ["s"], "port": 80},
                                run_env={"CAIRN_RUN_ID": "7", "CAIRN_RUN_TOKEN": "crt_secret"}),
    "training-cpu-one-replica": view(replicas=1, gpu_milli=0, spec={"command": ["/bin/sh", "-c", "echo hi"]}),
    "training-fractional": view(gpu_milli=250, replicas=1),
    "training-placed-model": view(gpu_model="NVIDIA-A100-SXM4-80GB", placement_nodes=("gpu-1", "gpu-2"),
                                  pool_node_selector={"pool": "a100"}),
    "training-image-only": view(spec={"image": "ghcr.io/acme/train:1.2", "working_dir": "/workspace"}),
    "training-with-limit": view(active_deadline_seconds=7200),
    "training-excluded-nodes": view(placement_nodes=("gpu-1", "gpu-3"), excluded_nodes=("gpu-2",)),
    "notebook": view(kind="notebook", replicas=1, gpu_milli=1000, spec={"env": {}}, notebook_token="t0k"),
    "notebook-image": view(kind="notebook", replicas=1, gpu_milli=0, spec={"image": "jupyter/scipy", "env": {}}),
    "deployment": view(kind="deployment", replicas=2, gpu_milli=500,
                       spec={"command": ["python", "-m", "http.server", "$(PORT)"], "port": 9000, "env": {}}),
    "deployment-autoscaled": view(kind="deployment", replicas=1, gpu_milli=0,
                                  spec={"command": ["serve"], "port": 8000, "max_replicas": 5, "env": {}}),
}
OPTIONS = {
    "default": ClusterOptions(),
    "volcano": ClusterOptions(volcano=True, volcano_queue="research"),
    "kueue": ClusterOptions(kueue_queue="team-a"),
    "hami": ClusterOptions(shared_gpu_resources={"nvidia.com/gpu": "one", "nvidia.com/gpucores": "percent",
                                                 "nvidia.com/gpumem-percentage": "percent"},
                           tolerations=({"key": "dedicated", "operator": "Equal", "value": "ml",
                                         "effect": "NoSchedule"},),
                           storage_class="fast", image_pull_secrets=("regcred",)),
    "shared-checkpoints": ClusterOptions(checkpoint_claim="team-checkpoints"),
}


def test_kubernetes_validate_ships_its_schemas_for_offline_use():
    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{K8S_VERSION}-local-strict"
    assert (schemas / "job-batch-v1.json").is_file()


@pytest.mark.parametrize("options_name", OPTIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_manifest_validates_against_the_kubernetes_schemas(variant, options_name):
    manifests = workload_manifests(VARIANTS[variant], OPTIONS[options_name])
    assert manifests
    for manifest in manifests:
        validate(manifest)


def test_namespace_enforces_restricted_pod_security():
    ns = namespace_manifest("vision", ClusterOptions())
    validate(ns)
    assert ns["metadata"]["name"] == "cairn-vision"
    labels = ns["metadata"]["labels"]
    # warn and audit too: a controller's refused pod then also reaches the audit log
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


def test_a_broken_manifest_is_caught_by_the_validator():
    """The validation really checks something: a typo'd field fails in strict mode."""
    job = by_kind(workload_manifests(view(), ClusterOptions()))["Job"]
    job["spec"]["completionsMode"] = "Indexed"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(job)


def test_training_is_an_indexed_job_with_a_headless_service():
    objs = by_kind(workload_manifests(view(), ClusterOptions()))
    assert set(objs) == {"Job", "Service", "PersistentVolumeClaim", "NetworkPolicy"}
    job, svc = objs["Job"], objs["Service"]
    assert job["metadata"]["name"] == "cairn-42-1"
    assert job["metadata"]["namespace"] == svc["metadata"]["namespace"] == "cairn-vision"
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4
    assert job["spec"]["backoffLimit"] == 0
    assert svc["metadata"]["name"] == "cairn-42"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert job["spec"]["template"]["spec"]["subdomain"] == "cairn-42"
    for obj in (job, svc, job["spec"]["template"]):
        assert obj["metadata"]["labels"]["cairn.dev/project"] == "vision"
        assert obj["metadata"]["labels"]["cairn.dev/workload"] == "42"


def test_training_env_suits_torchrun_and_megatron_launchers():
    template = pod_template(workload_manifests(view(), ClusterOptions()))
    env = env_of(template["spec"]["containers"][0])
    assert env["MASTER_ADDR"] == "cairn-42-1-0.cairn-42"
    assert env["MASTER_PORT"] == "29500"
    assert env["WORLD_SIZE"] == "4"
    assert env["NNODES"] == "4"
    assert env["NPROC_PER_NODE"] == "8"
    index = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env["RANK"] == env["NODE_RANK"] == env["CAIRN_REPLICA"] == index
    assert env["LR"] == "0.1"
    assert env["CAIRN_WORKLOAD_ID"] == "42"
    assert env["PET_NNODES"] == "4" and env["PET_NPROC_PER_NODE"] == "8" and env["PET_NODE_RANK"] == index
    assert env["PET_MASTER_ADDR"] == env["MASTER_ADDR"] and env["PET_MASTER_PORT"] == "29500"
    # several ranks: the command waits for rank 0's DNS record first (test_rendezvous.py runs it)
    command = template["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"] and command[-2:] == ["python", "train.py"]


def test_reserved_env_keys_in_an_old_spec_cannot_override_the_launcher_env():
    template = pod_template(workload_manifests(view(spec={"command": ["x"], "env": {"RANK": "9", "CAIRN_X": "1"}}),
                                               ClusterOptions()))
    names = [e["name"] for e in template["spec"]["containers"][0]["env"]]
    assert names.count("RANK") == 1
    assert "CAIRN_X" not in names


@pytest.mark.parametrize("variant", VARIANTS)
def test_pods_satisfy_pod_security_restricted(variant):
    spec = pod_template(workload_manifests(VARIANTS[variant], ClusterOptions()))["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert not any(key in spec for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert all("hostPath" not in volume for volume in spec.get("volumes", []))
    for container in spec["containers"]:
        ctx = container["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["privileged"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"]}


def test_whole_gpus_are_requested_as_nvidia_gpu_limits():
    container = pod_template(workload_manifests(view(gpu_milli=2000), ClusterOptions()))["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "4000m", "memory": "32768Mi", "nvidia.com/gpu": "2",
                                                "ephemeral-storage": "50Gi"}
    assert container["resources"]["requests"] == {"cpu": "4000m", "memory": "32768Mi", "ephemeral-storage": "1Gi"}


def test_fractional_gpus_use_the_configured_sharing_resources():
    manifests = workload_manifests(view(gpu_milli=250, replicas=1), OPTIONS["hami"])
    limits = pod_template(manifests)["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"
    assert limits["nvidia.com/gpucores"] == "25"
    assert limits["nvidia.com/gpumem-percentage"] == "25"
    milli = ClusterOptions(shared_gpu_resources={"example.com/gpu-milli": "milli"})
    limits = pod_template(workload_manifests(view(gpu_milli=250), milli))["spec"]["containers"][0]["resources"]["limits"]
    assert limits["example.com/gpu-milli"] == "250"
    assert "nvidia.com/gpu" not in limits


def test_placement_pool_and_gpu_model_become_node_selection_and_gpu_toleration():
    spec = pod_template(workload_manifests(VARIANTS["training-placed-model"], OPTIONS["hami"]))["spec"]
    assert spec["nodeSelector"] == {"pool": "a100"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1", "gpu-2"]},
    ]}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]


def test_volcano_adds_a_podgroup_for_the_gang():
    objs = by_kind(workload_manifests(view(), OPTIONS["volcano"]))
    group = objs["PodGroup"]
    assert group["metadata"]["name"] == "cairn-42-1"
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["queue"] == "research"
    assert group["spec"]["minResources"]["nvidia.com/gpu"] == "32"
    template = objs["Job"]["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "cairn-42-1"


def test_kueue_queue_label_and_suspended_job():
    job = by_kind(workload_manifests(view(), OPTIONS["kueue"]))["Job"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["spec"]["suspend"] is True


def test_the_run_time_limit_is_the_jobs_active_deadline_and_validates():
    for options in OPTIONS.values():
        job = by_kind(workload_manifests(view(active_deadline_seconds=7200), options))["Job"]
        assert job["spec"]["activeDeadlineSeconds"] == 7200
        validate(job)
    unlimited = by_kind(workload_manifests(view(), ClusterOptions()))["Job"]
    assert "activeDeadlineSeconds" not in unlimited["spec"]
    broken = by_kind(workload_manifests(view(active_deadline_seconds=7200), ClusterOptions()))["Job"]
    broken["spec"]["activeDeadlineSeconds"] = "2h"  # the schema checks the field's type
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


def test_notebook_is_a_statefulset_with_a_service_a_home_pvc_and_a_token_secret():
    objs = by_kind(workload_manifests(VARIANTS["notebook"], OPTIONS["hami"]))
    assert set(objs) == {"Secret", "PersistentVolumeClaim", "Service", "StatefulSet"}
    assert objs["PersistentVolumeClaim"]["metadata"]["name"] == "cairn-42-home"
    assert objs["PersistentVolumeClaim"]["spec"]["storageClassName"] == "fast"
    sts = objs["StatefulSet"]
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == "cairn-42"
    pod = sts["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "home", "persistentVolumeClaim": {"claimName": "cairn-42-home"}}]
    env = env_of(pod["containers"][0])
    assert env["JUPYTER_TOKEN"] == {"secretKeyRef": {"name": "cairn-42", "key": "token"}}
    assert objs["Secret"]["stringData"] == {"token": "t0k"}


def test_deployment_has_a_service_and_an_hpa_only_when_the_cluster_asks_for_one():
    objs = by_kind(workload_manifests(VARIANTS["deployment"], ClusterOptions()))
    assert set(objs) == {"Service", "PodDisruptionBudget", "Deployment"}  # Cairn's autoscaler sets the replicas
    assert objs["PodDisruptionBudget"]["spec"] == {"maxUnavailable": 1,
                                                   "selector": {"matchLabels": {"cairn.dev/workload": "42"}}}
    assert objs["Deployment"]["spec"]["replicas"] == 2
    container = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/", "port": 9000}
    objs = by_kind(workload_manifests(VARIANTS["deployment"], ClusterOptions(deployment_hpa=True)))
    assert set(objs) == {"Service", "PodDisruptionBudget", "Deployment", "HorizontalPodAutoscaler"}
    hpa = objs["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "cairn-42"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 2)
    assert objs["Service"]["spec"]["ports"][0]["targetPort"] == 9000
    scaled = by_kind(workload_manifests(VARIANTS["deployment-autoscaled"], ClusterOptions(deployment_hpa=True)))
    assert scaled["HorizontalPodAutoscaler"]["spec"]["maxReplicas"] == 5


def test_a_deployment_without_a_port_listens_on_8080_not_cairns_own_port():
    unnamed = replace(VARIANTS["deployment"], spec={**VARIANTS["deployment"].spec, "port": None})
    objs = by_kind(workload_manifests(unnamed, ClusterOptions()))
    container = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8080}]
    assert env_of(container)["PORT"] == "8080" and objs["Service"]["spec"]["ports"][0]["targetPort"] == 8080


@pytest.mark.parametrize("variant", ["training-with-run", "notebook-with-run", "deployment-with-run"])
def test_run_token_is_delivered_through_a_secret_not_the_pod_spec(variant):
    manifests = workload_manifests(VARIANTS[variant], ClusterOptions())
    secret = next(x for x in manifests if x["metadata"]["name"] == "cairn-42-1-run")
    assert secret["kind"] == "Secret" and secret["stringData"]["CAIRN_RUN_TOKEN"] == "crt_secret"
    assert manifests.index(secret) == 0  # created before anything that mounts it
    container = pod_template(manifests)["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "cairn-42-1-run"}}]
    assert "crt_secret" not in str(pod_template(manifests))


def test_training_pods_get_the_checkpoint_volume_and_a_memory_backed_shm_sized_from_the_request():
    objs = by_kind(workload_manifests(view(memory_mb=32768), ClusterOptions(storage_class="fast")))
    claim = objs["PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "cairn-42-checkpoints"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"] and claim["spec"]["storageClassName"] == "fast"
    pod = objs["Job"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["checkpoints"]["persistentVolumeClaim"]["claimName"] == "cairn-42-checkpoints"
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16384Mi"}
    container = pod["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"checkpoints": "/cairn/checkpoints", "dshm": "/dev/shm", "home": "/home/cairn"}
    assert env_of(container)["CAIRN_CHECKPOINT_DIR"] == "/cairn/checkpoints"
    small = pod_template(workload_manifests(view(memory_mb=100), ClusterOptions()))["spec"]
    assert {v["name"]: v for v in small["volumes"]}["dshm"]["emptyDir"]["sizeLimit"] == "64Mi"


def test_a_shared_checkpoint_claim_gives_each_job_its_own_sub_folder():
    objs = by_kind(workload_manifests(view(), ClusterOptions(checkpoint_claim="team-checkpoints")))
    assert "PersistentVolumeClaim" not in objs
    pod = objs["Job"]["spec"]["template"]["spec"]
    assert {v["name"]: v for v in pod["volumes"]}["checkpoints"]["persistentVolumeClaim"]["claimName"] == (
        "team-checkpoints")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "checkpoints")
    assert mount["subPath"] == "vision/42"


def test_a_training_job_placed_replica_by_replica_is_created_gated():
    template = pod_template(workload_manifests(view(replicas=2, placement_nodes=("gpu-2", "gpu-1")), ClusterOptions()))
    assert template["spec"]["schedulingGates"] == [{"name": "cairn.dev/placement"}]
    assert template["metadata"]["annotations"]["cairn.dev/placement"] == "0=gpu-2,1=gpu-1"
    assert "affinity" not in template["spec"]  # no `hostname In [...]`: each pod gets its own node
    # a placement that does not name every replica's node (an old row) stays a set of nodes
    spec = pod_template(workload_manifests(view(replicas=4, placement_nodes=("gpu-1", "gpu-2")), ClusterOptions()))["spec"]
    assert "schedulingGates" not in spec and "affinity" in spec
    # every replica on one node: the set of one node is exact, no gate (nothing waits for a pass)
    for replicas, nodes in ((1, ("gpu-1",)), (2, ("gpu-1", "gpu-1"))):
        spec = pod_template(workload_manifests(view(replicas=replicas, placement_nodes=nodes), ClusterOptions()))["spec"]
        assert "schedulingGates" not in spec
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1"]} in terms[0]["matchExpressions"]


def test_a_gated_pod_is_released_to_its_replicas_node():
    from apps.backends.kubernetes.manifests import placement_of, ungate_patch

    pod = {"metadata": {"annotations": {"cairn.dev/placement": "0=gpu-1,1=gpu-2",
                                        "batch.kubernetes.io/job-completion-index": "1"}},
           "spec": {"nodeSelector": {"pool": "a100"},
                    "schedulingGates": [{"name": "cairn.dev/placement"}, {"name": "example.com/other"}]}}
    assert placement_of(pod) == "gpu-2"
    assert ungate_patch(pod, "gpu-2") == [
        {"op": "test", "path": "/spec/schedulingGates", "value": pod["spec"]["schedulingGates"]},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "a100", "kubernetes.io/hostname": "gpu-2"}},
        {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "example.com/other"}]}]
    released = {**pod, "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-2"}}}
    assert placement_of(released) is None  # not gated (any more): nothing to do


def test_an_excluded_node_becomes_a_not_in_node_affinity_term():
    pod = pod_template(workload_manifests(view(placement_nodes=("gpu-1", "gpu-2"), excluded_nodes=("gpu-2",)),
                                          ClusterOptions()))["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    expressions = terms[0]["matchExpressions"]
    assert {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1"]} in expressions
    assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-2"]} in expressions
# -- project volumes (apps/storage) ---------------------------------------------------------------

VOLUMES = [{"name": "images", "mount": "/data/images", "read_only": False},
           {"name": "ckpt", "mount": "/mnt/ckpt", "read_only": True}]


@pytest.mark.parametrize("kind, extra", [("training", {"command": ["t"]}), ("notebook", {}),
                                         ("deployment", {"command": ["s"], "port": 80})])
def test_volumes_become_readwritemany_claims_mounted_as_the_spec_asks(kind, extra):
    v = view(kind=kind, replicas=1, spec={"env": {}, **extra, "volumes": VOLUMES},
             volume_sizes={"images": 50, "ckpt": 5})
    objects = workload_manifests(v, ClusterOptions(volume_storage_class="cephfs"))
    for manifest in objects:
        validate(manifest)
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"].startswith("cairn-vol-")]
    assert [c["metadata"]["name"] for c in claims] == ["cairn-vol-images", "cairn-vol-ckpt"]
    assert objects[:2] == claims  # before the pods that mount them
    assert claims[0]["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}},
                                 "storageClassName": "cephfs"}
    assert "cairn.dev/workload" not in claims[0]["metadata"]["labels"]  # the project's, not the workload's
    pod = pod_template(objects)["spec"]
    by_name = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/data/images"]["readOnly"] is False
    assert mounts["/mnt/ckpt"]["readOnly"] is True
    assert by_name[mounts["/mnt/ckpt"]["name"]]["persistentVolumeClaim"] == {"claimName": "cairn-vol-ckpt",
                                                                              "readOnly": True}
    assert all("hostPath" not in vol for vol in pod["volumes"])


def test_without_a_storage_class_the_claim_takes_the_clusters_default():
    v = view(spec={"command": ["t"], "volumes": VOLUMES[:1]}, volume_sizes={"images": 2})
    claim = workload_manifests(v, ClusterOptions())[0]
    assert "storageClassName" not in claim["spec"]
    validate(claim)


def test_a_served_model_is_the_artifacts_claim_mounted_read_only_at_its_versions_folder():
    v = view(kind="deployment", replicas=1, gpu_milli=0,
             spec={"command": ["serve"], "port": 80, "model": {"name": "resnet", "version": 3, "mount": "/model"}},
             volume_sizes={"artifacts": 20})
    objects = workload_manifests(v, ClusterOptions())
    for manifest in objects:
        validate(manifest)
    assert objects[0]["kind"] == "PersistentVolumeClaim" and objects[0]["metadata"]["name"] == "cairn-vol-artifacts"
    pod = pod_template(objects)["spec"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == "/model")
    assert mount == {"name": "model", "mountPath": "/model", "readOnly": True, "subPath": "models/resnet/3"}
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "cairn-vol-artifacts", "readOnly": True}} in pod["volumes"]


# -- datasets (apps/storage): the node cache's init container, NFS and host paths -----------------------

DATASETS = (
    {"name": "imgs", "version": 2, "mount": "/datasets/imgs", "digest": "d" * 64, "source": "s3",
     "location": {"bucket": "corpus", "prefix": "imgs"}, "manifest": [{"key": "a", "size": 1, "etag": "x"}],
     "store": {"bucket": "corpus", "prefix": "imgs", "access_key_id": "AK", "secret_access_key": "SK"}},
    {"name": "shared", "version": 1, "mount": "/mnt/shared", "digest": "e" * 64, "source": "nfs",
     "location": {"server": "nfs.lab", "path": "/export/shared"}},
    {"name": "scans", "version": 1, "mount": "/data/scans", "digest": "f" * 64, "source": "host_path",
     "location": {"path": "/srv/scans"}},
)


@pytest.mark.parametrize("kind, extra", [("training", {"command": ["t"]}), ("notebook", {}),
                                         ("deployment", {"command": ["s"], "port": 80})])
def test_datasets_mount_read_only_and_s3_versions_come_through_the_node_cache(kind, extra):
    v = view(kind=kind, replicas=1, spec={"env": {}, **extra}, datasets=DATASETS)
    objects = workload_manifests(v, ClusterOptions(cache_image="registry.local/cairn:1.0"))
    for manifest in objects:
        validate(manifest)
    secret = next(o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-datasets"))
    job = json.loads(secret["stringData"]["job.json"])
    assert job["entries"][0]["digest"] == "d" * 64 and job["entries"][0]["store"]["secret_access_key"] == "SK"
    pod = pod_template(objects)["spec"]
    [init] = pod["initContainers"]
    assert init["image"] == "registry.local/cairn:1.0"
    assert init["command"][:2] == ["python", "/app/apps/storage/cachefill.py"]
    assert init["securityContext"]["runAsNonRoot"] is True and init["securityContext"]["privileged"] is False
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/datasets/imgs"] == {"name": "dataset-cache", "mountPath": "/datasets/imgs", "readOnly": True,
                                        "subPath": f"{'d' * 64}/data"}
    assert all(mounts[p]["readOnly"] is True for p in ("/mnt/shared", "/data/scans"))
    volumes = {vol["name"]: vol for vol in pod["volumes"]}
    # Pod Security "restricted" allows claims, not nfs / hostPath volumes: each location is a
    # PersistentVolume pre-bound to a claim of the namespace
    assert not any("hostPath" in vol or "nfs" in vol for vol in pod["volumes"])
    pvs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PersistentVolume"}
    claims = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PersistentVolumeClaim"}
    sources = {}
    for vol in volumes.values():
        if "persistentVolumeClaim" in vol:
            claim = claims.get(vol["persistentVolumeClaim"]["claimName"])
            if claim is not None and "volumeName" in claim["spec"]:
                pv = pvs[claim["spec"]["volumeName"]]
                assert pv["spec"]["claimRef"] == {"namespace": "cairn-vision", "name": claim["metadata"]["name"]}
                assert claim["spec"]["storageClassName"] == pv["spec"]["storageClassName"] == ""
                sources[vol["name"]] = pv["spec"].get("nfs") or pv["spec"].get("hostPath")
    assert sources["dataset-cache"] == {"path": "/var/lib/cairn/dataset-cache", "type": "DirectoryOrCreate"}
    assert {"server": "nfs.lab", "path": "/export/shared", "readOnly": True} in sources.values()
    assert {"path": "/srv/scans", "type": "Directory"} in sources.values()
    assert all(volumes[name]["persistentVolumeClaim"]["readOnly"] for name in sources if name != "dataset-cache")
    assert "secret_access_key" not in json.dumps(pod)  # credentials only in the Secret


def test_the_init_containers_job_fills_a_cache_with_the_same_filler(tmp_path, s3_server):  # noqa: F811
    """The Secret's job.json, run through cachefill.py as the init container would, fills the cache."""
    import subprocess
    import sys

    from apps.storage import cachefill

    s3_server.make_bucket("corpus")
    s3_server.store("corpus").put("imgs/a.bin", b"hello")
    store = {"bucket": "corpus", "prefix": "imgs", "endpoint_url": s3_server.url, "region": "us-east-1",
             "access_key_id": "AK", "secret_access_key": "SK"}
    etag = next(iter(s3_server.store("corpus", "imgs").list()))[0]["e_tag"]
    dataset = {**DATASETS[0], "store": store, "manifest": [{"key": "a.bin", "size": 5, "etag": etag}]}
    objects = workload_manifests(view(replicas=1, datasets=(dataset,)), ClusterOptions())
    secret = next(o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-datasets"))
    job = json.loads(secret["stringData"]["job.json"])
    assert job["report_path"] == "/dev/termination-log" == pod_init(objects)["terminationMessagePath"]
    job["cache_root"] = str(tmp_path / "cache")  # the hostPath, here
    job["report_path"] = str(tmp_path / "termination-log")  # the kubelet's file, here
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    done = subprocess.run([sys.executable, cachefill.__file__, str(path), "--"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cache" / ("d" * 64) / "data" / "a.bin").read_bytes() == b"hello"
    report = json.loads((tmp_path / "termination-log").read_text())
    assert report["complete"] is True and report["held"] == {"d" * 64: 5} and report["evicted"] == []


def pod_init(objects) -> dict:
    job = next(o for o in objects if o["kind"] == "Job")
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    return init


def test_the_cache_report_fits_a_termination_message(tmp_path):
    """Too many versions for 4096 bytes: only the job's own and its evictions, marked partial."""
    from apps.storage import cachefill

    root = tmp_path / "cache"
    for i in range(80):
        entry = root / f"{i:064x}"
        entry.mkdir(parents=True)
        (entry / cachefill.COMPLETE).write_text(json.dumps({"bytes": i}))
    (root / f"{1:064x}.partial").mkdir()  # a fill under way: not held
    text = cachefill.report(root, filled=[f"{3:064x}"], evicted=[f"{x:064x}" for x in range(100, 200)])
    report = json.loads(text)
    assert len(text) <= cachefill.REPORT_LIMIT
    assert report["complete"] is False and report["held"] == {f"{3:064x}": 3}
    assert 0 < len(report["evicted"]) < 100 and report["evicted"][0] == f"{100:064x}"
    few = tmp_path / "few"
    (few / ("e" * 64)).mkdir(parents=True)
    (few / ("e" * 64) / cachefill.COMPLETE).write_text(json.dumps({"bytes": 7}))
    assert json.loads(cachefill.report(few, filled=["e" * 64], evicted=["f" * 64]))["held"] == {"e" * 64: 7}


def test_a_deployments_new_revision_changes_only_its_containers_command_image_env_and_size():
    options = ClusterOptions()
    first = by_kind(workload_manifests(view(kind="deployment", replicas=2, gpu_milli=0, cpu_milli=500, memory_mb=256,
                                            spec={"command": ["serve"], "port": 80, "env": {"V": "1"}},
                                            run_env={"CAIRN_RUN_ID": "7"}), options))["Deployment"]
    assert first["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert first["spec"]["template"]["metadata"]["annotations"] == {"cairn.dev/revision": "1"}
    second = by_kind(workload_manifests(view(kind="deployment", replicas=2, gpu_milli=0, cpu_milli=1000,
                                             memory_mb=512, revision=2, max_unavailable=0,
                                             spec={"command": ["serve", "--v2"], "image": "model:2", "port": 80,
                                                   "env": {"V": "2"}}), options))["Deployment"]
    assert second["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 1  # never 0 with maxSurge 0
    revised = revised_template(first["spec"]["template"], second["spec"]["template"], 2)
    validate({**first, "spec": {**first["spec"], "template": revised}})
    [main] = revised["spec"]["containers"]
    assert main["command"] == ["serve", "--v2"] and main["image"] == "model:2" and env_of(main)["V"] == "2"
    assert main["resources"]["requests"]["cpu"] == "1000m" or main["resources"]["requests"]["cpu"] in ("1", 1)
    assert main["envFrom"] == first["spec"]["template"]["spec"]["containers"][0]["envFrom"]  # the attempt's Secret
    assert revised["metadata"]["annotations"] == {"cairn.dev/revision": "2"}
    assert revised["metadata"]["labels"] == first["spec"]["template"]["metadata"]["labels"]  # the selector holds


def test_a_canary_is_a_deployment_and_service_of_its_own_that_validate_and_never_overlap_the_main_ones():
    options = OPTIONS["hami"]
    base = view(kind="deployment", replicas=3, gpu_milli=0, cpu_milli=500, memory_mb=256,
                spec={"command": ["serve"], "port": 80, "env": {"V": "1"}}, run_env={"CAIRN_RUN_ID": "7"})
    main = by_kind(workload_manifests(base, options))
    fresh = by_kind(workload_manifests(replace(base, spec={**base.spec, "env": {"V": "2"}}, revision=2),
                                       options))["Deployment"]["spec"]["template"]
    objs = by_kind(canary_manifests(base, options, main_template=main["Deployment"]["spec"]["template"],
                                    fresh_template=fresh, revision=2))
    for obj in objs.values():
        validate(obj)
    deployment, service = objs["Deployment"], objs["Service"]
    name = f"cairn-{base.id}-canary"
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == name
    assert deployment["spec"]["replicas"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    # The main selectors (Deployment and Service) match no canary pod; the canary's only them.
    for selector in (main["Deployment"]["spec"]["selector"]["matchLabels"], main["Service"]["spec"]["selector"]):
        assert not all(labels.get(k) == v for k, v in selector.items())
    assert all(labels.get(k) == v for k, v in deployment["spec"]["selector"]["matchLabels"].items())
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert env_of(container)["V"] == "2" and deployment["spec"]["template"]["metadata"]["annotations"] == {
        "cairn.dev/revision": "2"}
    assert container["envFrom"] == main["Deployment"]["spec"]["template"]["spec"]["containers"][0]["envFrom"]


def test_an_admitted_surge_is_the_controllers_max_surge_and_validates():
    first = by_kind(workload_manifests(view(kind="deployment", replicas=2, gpu_milli=0, cpu_milli=500, memory_mb=256,
                                            spec={"command": ["serve"], "port": 80, "env": {}}),
                                       OPTIONS["hami"]))["Deployment"]
    for unavailable, surge, expected in ((0, 1, (0, 1)), (2, 3, (2, 3)), (0, 0, (1, 0))):
        strategy = deployment_strategy(unavailable, surge)
        assert (strategy["rollingUpdate"]["maxUnavailable"], strategy["rollingUpdate"]["maxSurge"]) == expected
        validate({**first, "spec": {**first["spec"], "strategy": strategy}})


def _layout(**kw):
    args = {"admitted": 3, "stable": 1, "canary": None, "surge": 0, "surge_wanted": 0, "max_unavailable": 1,
            "running_canary": None, "main_complete": True}
    return deployment_layout(**{**args, **kw})


def test_the_layout_never_runs_more_pods_than_admitted():
    assert _layout().main_replicas == 3 and _layout().canary_revision is None
    # A canary takes one of the admitted replicas.
    assert (_layout(canary=2).main_replicas, _layout(canary=2).canary_revision) == (2, 2)
    # A single replica's canary waits for its surge replica, then runs on it.
    assert (_layout(admitted=1, canary=2, surge_wanted=1).main_replicas,
            _layout(admitted=1, canary=2, surge_wanted=1).canary_revision) == (1, None)
    surged = _layout(admitted=2, canary=2, surge=1, surge_wanted=1)
    assert (surged.main_replicas, surged.canary_revision, surged.strategy["rollingUpdate"]["maxSurge"]) == (1, 2, 0)
    # Promoted: the canary pod (now the stable revision) serves until the main Deployment ran it out.
    promoted = _layout(stable=2, running_canary=2, main_complete=False)
    assert (promoted.main_replicas, promoted.canary_revision) == (2, 2)
    assert (_layout(stable=2, running_canary=2).main_replicas, _layout(stable=2, running_canary=2).canary_revision) \
        == (3, None)
    # Rolled back: a canary of another revision goes at once.
    assert _layout(running_canary=2, main_complete=False).canary_revision is None
    # A rolling surge is maxSurge, not replicas; with max_unavailable 0 the template waits for it.
    waiting = _layout(admitted=2, stable=2, surge_wanted=1, max_unavailable=0, main_complete=False)
    assert (waiting.main_replicas, waiting.template_ready) == (2, False)
    admitted = _layout(admitted=3, stable=2, surge=1, surge_wanted=1, max_unavailable=0, main_complete=False)
    assert (admitted.main_replicas, admitted.template_ready) == (2, True)
    assert admitted.strategy["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}


@pytest.mark.parametrize("kind, extra", [("training", {"command": ["t"]}), ("deployment", {"command": ["s"], "port": 80})])
def test_training_and_serving_pods_get_a_writable_home_shm_and_their_own_lifecycle_settings(kind, extra):
    """Issue 45 item 3: HOME and the working directory on an emptyDir (uid 1000 can write there
    whatever the image), /dev/shm for serving too, a disk limit, the crash's last lines as the
    termination message, the kubelet's grace = Cairn's, and Cairn's priority as a PriorityClass."""
    options = ClusterOptions(termination_grace_seconds=10, priority_classes={"P1": "cairn-high"})
    objects = workload_manifests(view(kind=kind, replicas=1, spec={"env": {}, **extra}, priority=1), options)
    for manifest in objects:
        validate(manifest)
    pod = pod_template(objects)["spec"]
    [main] = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["home"] == {"name": "home", "emptyDir": {"sizeLimit": "10Gi"}}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    assert mounts["home"] == "/home/cairn" and mounts["dshm"] == "/dev/shm"
    assert env_of(main)["HOME"] == "/home/cairn" and main["workingDir"] == "/home/cairn"
    assert main["resources"]["limits"]["ephemeral-storage"] == "50Gi"
    assert main["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert pod["terminationGracePeriodSeconds"] == 10
    assert pod["priorityClassName"] == "cairn-high"
    plain = pod_template(workload_manifests(view(kind=kind, replicas=1, spec={"env": {}, **extra}, priority=3),
                                            options))["spec"]
    assert "priorityClassName" not in plain  # P3 not mapped: the cluster's default
