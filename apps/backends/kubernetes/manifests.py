"""Pure manifest builders: a workload as plain data -> the Kubernetes objects Cairn creates.

No ORM, no I/O, no `kubernetes` import: every function here takes dataclasses and dicts and
returns dicts ready to send. Unit-tested directly and validated against the Kubernetes JSON
schemas (kubernetes-validate) in tests/backends/kubernetes/test_manifests.py.

What each kind becomes (all in the project's namespace, all labelled cairn.dev/project and
cairn.dev/workload, names derived from the workload id):
- every kind: Secret `cairn-<id>-<attempt>-run` with the attempt's tracking run id and token.
- training:   Job `cairn-<id>-<attempt>` (Indexed, one pod per replica, rank = completion index,
              activeDeadlineSeconds = what is left of the run-time limit)
              + headless Service `cairn-<id>` (stable pod DNS for MASTER_ADDR)
              + Volcano PodGroup `cairn-<id>-<attempt>` when the cluster runs Volcano.
- notebook:   Secret `cairn-<id>` (the Jupyter token) + PVC `cairn-<id>-home` + StatefulSet
              `cairn-<id>` + Service `cairn-<id>`.
- deployment: Deployment `cairn-<id>` + Service `cairn-<id>` + PodDisruptionBudget `cairn-<id>`
  (maxUnavailable: the rolling update's) (+ a HorizontalPodAutoscaler (v2) only
  when the cluster's config asks for one: Cairn's own autoscaler sets the replicas otherwise);
  during a canary, Deployment `cairn-<id>-canary` + Service `cairn-<id>-canary` (its pods carry
  `cairn.dev/canary` instead of `cairn.dev/workload`, so the main Service never selects them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from apps.clusters.accelerators import ARCH_LABEL, VENDORS, Vendor
from apps.deployments.conf import DEPLOYMENT_PORT
from apps.deployments.readiness import readiness_path
from apps.notebooks.commands import CODE_SERVER_LAUNCHER, JUPYTERLAB_LAUNCHER, ide_of
from apps.notebooks.commands import PREFIX as NOTEBOOK_PROXY_PREFIX

from .storage import with_storage

LABEL_PROJECT = "cairn.dev/project"
LABEL_WORKLOAD = "cairn.dev/workload"
LABEL_KIND = "cairn.dev/kind"
LABEL_ATTEMPT = "cairn.dev/attempt"
ANNOTATION_REVISION = "cairn.dev/revision"  # a deployment's pod template: the revision it runs
LABEL_CANARY = "cairn.dev/canary"  # a canary pod's label (the workload id), instead of LABEL_WORKLOAD
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "cairn"
MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Per-replica placement (issue 42): a training pod is created gated; Cairn's reconciler sets the
# node its replica was placed on (PLACEMENT_ANNOTATION: "<replica>=<node>,...") as the pod's
# nodeSelector and removes the gate, so kube-scheduler binds each replica where Cairn decided.
PLACEMENT_GATE = "cairn.dev/placement"
PLACEMENT_ANNOTATION = "cairn.dev/placement"

MASTER_PORT = 29500
NOTEBOOK_PORT = 8888
NOTEBOOK_HOME = "/home/cairn"
CONTAINER = "main"
RUN_AS_USER = 1000
FINISHED_JOB_TTL_SECONDS = 7 * 24 * 3600
CHECKPOINT_DIR = "/cairn/checkpoints"  # CAIRN_CHECKPOINT_DIR of training pods (cairn.checkpoint)
MIN_SHM_MB = 64


@dataclass(frozen=True)
class ClusterOptions:
    """How a cluster wants its objects: from settings.CAIRN_KUBERNETES and Cluster.config."""

    namespace_prefix: str = "cairn-"
    gpu_resource: str = "nvidia.com/gpu"
    # Fractional GPUs (0 < gpu < 1): resource name -> "one" (1), "percent" (of one GPU), "milli".
    shared_gpu_resources: dict[str, str] = field(default_factory=lambda: {"nvidia.com/gpu": "one"})
    gpu_product_label: str = "nvidia.com/gpu.product"
    tolerations: tuple[dict, ...] = ()
    volcano: bool = False
    volcano_queue: str = "default"
    kueue_queue: str = ""
    default_image: str = "python:3.12-slim"
    notebook_image: str = "quay.io/jupyter/base-notebook:latest"  # ide: jupyterlab
    vscode_notebook_image: str = "cairn-notebook:4.100.3"  # ide: vscode (code-server on PATH)
    notebook_storage: str = "10Gi"
    storage_class: str = ""
    api_url: str = "http://cairn.cairn-system.svc:8000"
    image_pull_secrets: tuple[str, ...] = ()
    # Deployments are scaled by Cairn's autoscaler (it sets the Deployment's replicas); an admin
    # may ask for a Kubernetes HPA instead (cluster config "deployment_hpa": true).
    deployment_hpa: bool = False
    # Training checkpoints (docs/training.md): a ReadWriteMany PVC per job of this size, or, with
    # `checkpoint_claim`, a shared PVC the cluster offers, each job in its own sub-folder.
    checkpoint_storage: str = "20Gi"
    checkpoint_claim: str = ""
    # Per accelerator type, its resource names and labels (apps.clusters.accelerators); the NVIDIA
    # entry is built from gpu_resource / shared_gpu_resources / gpu_product_label by options_for.
    accelerators: dict[str, Vendor] = field(default_factory=lambda: dict(VENDORS))
    volume_storage_class: str = ""  # project volumes: a ReadWriteMany class (apps/storage, docs/data.md)
    dataset_cache_path: str = "/var/lib/cairn/dataset-cache"  # the node cache's hostPath
    dataset_cache_gb: float = 50.0
    cache_image: str = "cairn:latest"  # Cairn's own image: runs apps/storage/cachefill.py in the init container
    # Isolation (B5): a default-deny NetworkPolicy per project namespace, with what Cairn needs let
    # through. Cairn's own pods: `cairn_namespace`, labelled app.kubernetes.io/name=cairn
    # (platform/kubernetes/cairn.yaml); `cairn_cidrs`: where Cairn runs when it is outside the
    # cluster (its notebook proxy then comes through the API server: the control plane's
    # addresses); `egress_cidrs`: where else pods may connect (e.g. "0.0.0.0/0" for the internet).
    # Pods' own lifecycle (issue 45 item 3): the kubelet's grace before SIGKILL is Cairn's stop
    # grace (Cairn then force-deletes only pods on nodes that are not Ready); each container may
    # write this much to its node's disk (HOME, /tmp, logs) before it is evicted; Cairn's
    # priorities P0-P5 as PriorityClass names the cluster has ({"P0": "cairn-p0", ...}).
    termination_grace_seconds: int = 30
    ephemeral_storage: str = "50Gi"
    home_size: str = "10Gi"
    priority_classes: dict[str, str] = field(default_factory=dict)
    network_policies: bool = True
    cairn_namespace: str = "cairn-system"
    cairn_cidrs: tuple[str, ...] = ()
    egress_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkloadView:
    """What the builders read about a workload (copied out of the ORM row by the backend)."""

    id: int
    kind: str  # training | notebook | deployment
    name: str
    project: str  # the project slug
    attempt: int
    replicas: int
    gpu_milli: int
    cpu_milli: int
    memory_mb: int
    spec: dict
    gpu_model: str = ""
    accelerator_type: str = ""  # "" or "nvidia": options.gpu_resource & co.; else options.accelerators[type]
    arch: tuple[str, ...] = ()  # CPU architectures it may run on (empty: any)
    pool_node_selector: dict[str, str] = field(default_factory=dict)
    placement_nodes: tuple[str, ...] = ()  # the nodes of the replicas, by replica (0, 1, ...)
    notebook_token: str = ""
    # Tracking: CAIRN_RUN_ID / CAIRN_RUN_TOKEN of this attempt, delivered through a Secret.
    run_env: dict[str, str] = field(default_factory=dict)
    # Training: seconds this attempt's Job may be active (what is left of the run-time limit).
    active_deadline_seconds: int | None = None
    # Nodes the job must not run on (unhealthy, or cordoned SlowNode): a NotIn affinity term.
    excluded_nodes: tuple[str, ...] = ()
    # Project volumes the spec mounts: name -> declared GiB (the claim's request).
    volume_sizes: dict[str, int] = field(default_factory=dict)
    # Datasets the spec mounts, resolved: spec entry + location (+ manifest and store for S3).
    datasets: tuple[dict, ...] = ()
    # Deployments: the revision the pod template runs (its command, image, env and resources are
    # the spec's and the size's above) and how many pods the Deployment controller may take
    # down at a time while it replaces them (Cairn's admitted surge included; at least 1).
    revision: int = 1
    max_unavailable: int = 1
    priority: int | None = None  # Cairn's P0-P5 (0-5): priorityClassName when the cluster maps it
    # The pool's network profile (apps/clusters/networks.py, cleaned): extra resources, Multus
    # networks, capabilities, runtimeClassName, env, the Pod Security level it needs. Training only.
    network: dict = field(default_factory=dict)


# -- names and labels ----------------------------------------------------------------------------

def object_name(workload_id: int) -> str:
    return f"cairn-{workload_id}"


def job_name(workload_id: int, attempt: int) -> str:
    return f"cairn-{workload_id}-{attempt}"


def run_secret_name(workload_id: int, attempt: int) -> str:
    return f"cairn-{workload_id}-{attempt}-run"


def run_secret(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """The attempt's run credentials as a Secret (empty list when there are none)."""
    if not view.run_env:
        return []
    name = run_secret_name(view.id, view.attempt)
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": _meta(view, name, options, **{LABEL_ATTEMPT: str(view.attempt)}),
             "stringData": {k: str(v) for k, v in view.run_env.items()}}]


def owned_by_job(obj: dict, job: dict) -> dict:
    """The metadata patch that makes a per-attempt object (run Secret, datasets Secret) a dependent
    of its attempt's Job: the garbage collector deletes it with the Job."""
    meta = job["metadata"]
    return {"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                              "uid": meta["uid"]}]}}


def workload_object_names(workload_id: int, attempts: int) -> dict[str, list[str]]:
    """Every object Cairn may have created for a workload, by kind (names are deterministic):
    what a finished workload's clean-up deletes. "Secret" holds the credentials (run tokens,
    dataset store keys, the notebook token)."""
    name = object_name(workload_id)
    return {
        "Secret": [name, *(f"{job_name(workload_id, a)}-{s}" for a in range(1, attempts + 1)
                           for s in ("run", "datasets"))],
        "Job": [job_name(workload_id, a) for a in range(1, attempts + 1)],
        "Deployment": [name, canary_name(workload_id)],
        "StatefulSet": [name],
        "HorizontalPodAutoscaler": [name],
        "Service": [name, canary_name(workload_id)],
        "NetworkPolicy": [f"{name}-ranks"],
        "PodDisruptionBudget": [name],
        "PersistentVolumeClaim": [checkpoint_claim_name(workload_id), home_claim_name(workload_id)],
    }


def run_env_from(view: WorkloadView) -> list[dict]:
    return [{"secretRef": {"name": run_secret_name(view.id, view.attempt)}}] if view.run_env else []


def home_claim_name(workload_id: int) -> str:
    return f"cairn-{workload_id}-home"


def starts_again_after_stop(kind: str, status: str) -> bool:
    """A stopped notebook may be started again: its objects but its token Secret may go, its home
    claim stays (kind names live in this module only: tests/workloads/test_kinds.py)."""
    return kind == "notebook" and status == "stopped"


def namespace_for(project: str, options: ClusterOptions) -> str:
    """One namespace per project: `<prefix><slug>` (slugs are DNS labels of at most 40 chars)."""
    return f"{options.namespace_prefix}{project}"[:63].rstrip("-")


def workload_labels(view: WorkloadView) -> dict[str, str]:
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_PROJECT: view.project,
        LABEL_WORKLOAD: str(view.id),
        LABEL_KIND: view.kind,
    }


def selector_labels(view: WorkloadView) -> dict[str, str]:
    return {LABEL_WORKLOAD: str(view.id)}


def _meta(view: WorkloadView, name: str, options: ClusterOptions, **extra_labels: str) -> dict:
    return {
        "name": name,
        "namespace": namespace_for(view.project, options),
        "labels": {**workload_labels(view), **extra_labels},
    }


POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")


def namespace_manifest(project: str, options: ClusterOptions, *, enforce: str = "restricted") -> dict:
    """The project's namespace, enforcing Pod Security "restricted" (and warning and auditing at
    it: a controller's refused pod is otherwise only an event on the Job or ReplicaSet). A pool's
    network profile may need a weaker level enforced (`enforce`); warn and audit stay restricted."""
    levels = {f"pod-security.kubernetes.io/{mode}{suffix}": value for mode in ("enforce", "warn", "audit")
              for suffix, value in (("", "restricted"), ("-version", "latest"))}
    levels[POD_SECURITY_ENFORCE] = enforce
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace_for(project, options),
            "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_PROJECT: project, **levels},
        },
    }


PROJECT_ROLE = "cairn-project"  # platform/kubernetes/rbac.yaml: what Cairn may do inside a project namespace


def project_role_binding(project: str, options: ClusterOptions, subject: dict) -> dict:
    """Binds the ClusterRole `cairn-project` (Secrets) to Cairn's identity in this project's
    namespace only: Cairn reads and writes Secrets where it created them, never cluster-wide."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "cairn", "namespace": namespace_for(project, options),
                     "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_PROJECT: project}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PROJECT_ROLE},
        "subjects": [subject],
    }


def rbac_subject(username: str) -> dict:
    """An RBAC subject for the user name the API server knows Cairn by (SelfSubjectReview)."""
    prefix = "system:serviceaccount:"
    if username.startswith(prefix) and username.count(":") == 3:
        namespace, name = username[len(prefix):].split(":")
        return {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": username}


def _cairn_peers(options: ClusterOptions) -> list[dict]:
    """Cairn's own pods (web: gateway and notebook proxy; worker: the culler), and its addresses
    outside the cluster when it runs there."""
    return [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": options.cairn_namespace}},
             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "cairn"}}},
            *({"ipBlock": {"cidr": cidr}} for cidr in options.cairn_cidrs)]


def network_policies(project: str, options: ClusterOptions) -> list[dict]:
    """A project namespace's NetworkPolicies: nothing in or out (default deny) but DNS, Cairn ->
    deployments (the gateway) and notebooks (proxy, culler), pods -> Cairn (tracking, datasets),
    and `egress_cidrs`. The ranks of a training job reach each other through their own policy
    (rank_network_policy). Policies are additive: each one below opens one path."""
    if not options.network_policies:
        return []
    namespace = namespace_for(project, options)

    def policy(name: str, spec: dict) -> dict:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_PROJECT: project}},
                "spec": spec}

    dns = {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
           "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    egress = [dns, {"to": _cairn_peers(options)}]
    if options.egress_cidrs:
        egress.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in options.egress_cidrs]})
    served = {"matchExpressions": [{"key": LABEL_KIND, "operator": "In", "values": ["deployment", "notebook"]}]}
    return [
        policy("cairn-default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        policy("cairn-egress", {"podSelector": {}, "policyTypes": ["Egress"], "egress": egress}),
        policy("cairn-from-cairn", {"podSelector": served, "policyTypes": ["Ingress"],
                                    "ingress": [{"from": _cairn_peers(options)}]}),
    ]


def rank_network_policy(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """The ranks of one training job reach each other (rendezvous, NCCL), and nothing else does."""
    if not options.network_policies:
        return []
    peers = [{"podSelector": {"matchLabels": selector_labels(view)}}]
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
             "metadata": _meta(view, f"{object_name(view.id)}-ranks", options),
             "spec": {"podSelector": {"matchLabels": selector_labels(view)}, "policyTypes": ["Ingress", "Egress"],
                      "ingress": [{"from": peers}], "egress": [{"to": peers}]}}]


# -- pod pieces ----------------------------------------------------------------------------------

def device_names(view: WorkloadView, options: ClusterOptions) -> tuple[str, dict[str, str], str]:
    """The workload's vendor's resource, sharing resources and product label (apps.clusters.accelerators)."""
    vendor = options.accelerators.get(view.accelerator_type) if view.accelerator_type not in ("", "nvidia") else None
    if vendor is None:
        return options.gpu_resource, options.shared_gpu_resources, options.gpu_product_label
    return vendor.resource, vendor.shared_resources, vendor.product_labels[0] if vendor.product_labels else ""


def resources(view: WorkloadView, options: ClusterOptions) -> dict:
    """Requests = limits (Guaranteed QoS for CPU/memory); devices of the workload's vendor, whole or
    through its sharing resources."""
    amounts: dict[str, str | int] = {"cpu": f"{view.cpu_milli}m", "memory": f"{view.memory_mb}Mi"}
    resource, shared, _ = device_names(view, options)
    if view.gpu_milli >= 1000:
        amounts[resource] = str(math.ceil(view.gpu_milli / 1000))
    elif view.gpu_milli > 0:
        for name, unit in shared.items():
            if unit == "percent":
                amounts[name] = str(max(1, math.ceil(view.gpu_milli / 10)))
            elif unit == "milli":
                amounts[name] = str(view.gpu_milli)
            else:
                amounts[name] = "1"
    limits = {k: str(v) for k, v in amounts.items()}
    # Extended resources (GPUs) may only be given in limits (requests default to them).
    requests = {k: v for k, v in limits.items() if k in ("cpu", "memory")}
    if options.ephemeral_storage:
        # a limit (the kubelet evicts a pod that fills its node's disk) with a small request, so
        # that nodes reporting little allocatable disk still take it
        limits["ephemeral-storage"] = options.ephemeral_storage
        requests["ephemeral-storage"] = "1Gi"
    return {"requests": requests, "limits": limits}


def container_security_context(add_capabilities: tuple[str, ...] | list[str] = ()) -> dict:
    """Pod Security "restricted": non-root, no privilege escalation, no capabilities, RuntimeDefault
    (a network profile may add IPC_LOCK and the like: apps/clusters/networks.ALLOWED_CAPABILITIES)."""
    capabilities: dict = {"drop": ["ALL"]}
    if add_capabilities:
        capabilities["add"] = sorted(add_capabilities)
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsNonRoot": True,
        "capabilities": capabilities,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> dict:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        # chown a volume only when its root is not already ours: a large checkpoint or dataset
        # claim is not walked file by file at every pod start
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def gated_placement(view: WorkloadView) -> dict[int, str]:
    """Replica -> node for the training pods Cairn places one by one (scheduling gate, then a
    per-pod nodeSelector: PLACEMENT_GATE); empty when it does not (other kinds, no placement, a
    replica placed on a node the job must be kept off, or every replica on one node: the set
    `hostname In [node]` is then exact, and the pods need no reconciler pass to start)."""
    if view.kind != "training" or len(view.placement_nodes) != view.replicas:
        return {}
    if len(set(view.placement_nodes)) < 2:
        return {}
    if set(view.placement_nodes) & set(view.excluded_nodes):
        return {}
    return dict(enumerate(view.placement_nodes))


def placement_annotation(placement: dict[int, str]) -> str:
    return ",".join(f"{replica}={node}" for replica, node in sorted(placement.items()))


def placement_of(pod: dict) -> str | None:
    """The node Cairn placed a gated pod's replica on (its template's PLACEMENT_ANNOTATION and its
    completion index), or None when the pod is not gated by Cairn or names no node for it."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if not any(g.get("name") == PLACEMENT_GATE for g in spec.get("schedulingGates") or []):
        return None
    annotations = meta.get("annotations") or {}
    index = annotations.get(COMPLETION_INDEX_ANNOTATION) or (meta.get("labels") or {}).get(COMPLETION_INDEX_ANNOTATION)
    for entry in (annotations.get(PLACEMENT_ANNOTATION) or "").split(","):
        replica, _, node = entry.partition("=")
        if replica == index and node:
            return node
    return None


def ungate_patch(pod: dict, node: str) -> list[dict]:
    """The JSON patch that releases a gated pod to kube-scheduler on `node`: its nodeSelector gets
    kubernetes.io/hostname (a gated pod's scheduling constraints may be narrowed, Kubernetes
    1.27+) and Cairn's gate goes; the `test` makes it fail if the gates changed meanwhile."""
    spec = pod.get("spec") or {}
    gates = spec.get("schedulingGates") or []
    rest = [g for g in gates if g.get("name") != PLACEMENT_GATE]
    return [
        {"op": "test", "path": "/spec/schedulingGates", "value": gates},
        {"op": "add", "path": "/spec/nodeSelector", "value": {**(spec.get("nodeSelector") or {}), HOSTNAME_LABEL: node}},
        {"op": "replace", "path": "/spec/schedulingGates", "value": rest} if rest else
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]


def node_affinity(view: WorkloadView, options: ClusterOptions) -> dict | None:
    """Required node affinity: the model asked for (several: "A|B"), its CPU architectures when it
    may run on several (one is a nodeSelector), and the nodes Cairn's scheduler placed it on (as a
    set, unless each replica's pod gets its own node while gated: gated_placement)."""
    expressions = []
    label = device_names(view, options)[2]
    if view.gpu_model and label:
        models = [m for m in view.gpu_model.split("|") if m]
        expressions.append({"key": label, "operator": "In", "values": models})
    if len(view.arch) > 1:
        expressions.append({"key": ARCH_LABEL, "operator": "In", "values": sorted(view.arch)})
    nodes = sorted(set(view.placement_nodes) - set(view.excluded_nodes))
    if nodes and not gated_placement(view):
        expressions.append({"key": HOSTNAME_LABEL, "operator": "In", "values": nodes})
    excluded = sorted(set(view.excluded_nodes))
    if excluded:
        expressions.append({"key": HOSTNAME_LABEL, "operator": "NotIn", "values": excluded})
    if not expressions:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}],
    }}}


def tolerations(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    result = [dict(t) for t in options.tolerations]
    if view.gpu_milli > 0:
        result.append({"key": device_names(view, options)[0], "operator": "Exists", "effect": "NoSchedule"})
    return result


def _env_list(values: dict[str, str]) -> list[dict]:
    return [{"name": k, "value": str(v)} for k, v in values.items()]


def _field_env(name: str, path: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def cairn_env(view: WorkloadView, options: ClusterOptions) -> dict[str, str]:
    """What the `cairn` SDK reads inside the replica."""
    return {
        "CAIRN_API_URL": options.api_url,
        "CAIRN_PROJECT": view.project,
        "CAIRN_WORKLOAD_ID": str(view.id),
        "CAIRN_WORKLOAD_NAME": view.name,
        "CAIRN_KIND": view.kind,
        "CAIRN_ATTEMPT": str(view.attempt),
        "PYTHONUNBUFFERED": "1",
    }


def user_env(view: WorkloadView, reserved: set[str]) -> dict[str, str]:
    """The spec's env minus keys Cairn sets (the API refuses them; older rows are filtered here)."""
    env = view.spec.get("env") or {}
    return {str(k): str(v) for k, v in env.items() if k not in reserved and not str(k).startswith("CAIRN_")}


def pod_spec(view: WorkloadView, options: ClusterOptions, *, container: dict, restart_policy: str,
             volumes: list[dict] | None = None, **extra) -> dict:
    container = {
        "name": CONTAINER,
        "image": view.spec.get("image") or options.default_image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources(view, options),
        "securityContext": container_security_context(),
        # a crash's last lines reach the pod's status (and Cairn's event) even when the pod,
        # and its log with it, is deleted for the next attempt
        "terminationMessagePolicy": "FallbackToLogsOnError",
        **container,
    }
    spec: dict = {
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": max(1, int(options.termination_grace_seconds)),
        "securityContext": pod_security_context(),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [container],
        **extra,
    }
    node_selector = dict(view.pool_node_selector or {})
    if len(view.arch) == 1:
        node_selector[ARCH_LABEL] = view.arch[0]
    if node_selector:
        spec["nodeSelector"] = node_selector
    affinity = node_affinity(view, options)
    if affinity:
        spec["affinity"] = affinity
    tol = tolerations(view, options)
    if tol:
        spec["tolerations"] = tol
    if volumes:
        spec["volumes"] = volumes
    if options.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in options.image_pull_secrets]
    priority_class = options.priority_classes.get(f"P{view.priority}") if view.priority is not None else None
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


WORK_HOME = "/home/cairn"  # training and serving: HOME and the default working directory


def home_pieces(view: WorkloadView, options: ClusterOptions) -> tuple[list[dict], list[dict], dict[str, str]]:
    """(volumes, mounts, env) giving a training or serving container a writable HOME (and working
    directory) as uid 1000: an emptyDir, since images' own HOME is often root's or missing, and
    a memory-backed /dev/shm (serving frameworks use it too)."""
    volumes = [{"name": "home", "emptyDir": {"sizeLimit": options.home_size}},
               {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_size_mb(view)}Mi"}}]
    mounts = [{"name": "home", "mountPath": WORK_HOME}, {"name": "dshm", "mountPath": "/dev/shm"}]
    return volumes, mounts, {"HOME": WORK_HOME}


# -- training ------------------------------------------------------------------------------------

TRAINING_RESERVED = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "NNODES", "NPROC_PER_NODE", "CUDA_VISIBLE_DEVICES", "PORT",
    # torchrun's own environment (its --nnodes, --node-rank, ... read from PET_<NAME>)
    "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE",
})
MULTUS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RENDEZVOUS_WAIT_SECONDS = 300
# Ranks start together, but rank 0's DNS record (<job>-0.<headless service>) appears only once its
# pod has an address: a launcher resolving MASTER_ADDR before then fails the attempt. Each rank
# waits for it (getent, else Python's resolver; neither in the image: no wait), at most
# $CAIRN_RENDEZVOUS_WAIT_SECONDS, then runs its command whatever the answer.
RENDEZVOUS_WAIT = r"""
resolves() { if command -v getent >/dev/null 2>&1; then getent hosts "$MASTER_ADDR" >/dev/null 2>&1
  else python3 -c 'import os, socket; socket.getaddrinfo(os.environ["MASTER_ADDR"], None)' >/dev/null 2>&1; fi; }
if command -v getent >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1; then
  waited=0; limit=${CAIRN_RENDEZVOUS_WAIT_SECONDS:-300}
  until resolves; do
    [ "$waited" = 0 ] && echo "cairn: waiting for rank 0's DNS record ($MASTER_ADDR)" >&2
    if [ "$waited" -ge "$limit" ]; then
      echo "cairn: $MASTER_ADDR does not resolve after ${limit}s; starting anyway" >&2; break
    fi
    sleep 1; waited=$((waited + 1))
  done
fi
exec "$@"
""".strip()


def nproc_per_node(view: WorkloadView) -> int:
    """Processes per pod for a launcher: the spec's `nproc_per_node`, else one per whole GPU (1)."""
    explicit = view.spec.get("nproc_per_node")
    if isinstance(explicit, int) and not isinstance(explicit, bool) and explicit >= 1:
        return explicit
    return max(1, view.gpu_milli // 1000)


def rendezvous_command(view: WorkloadView, command: list[str]) -> list[str]:
    """The training command, behind the wait for rank 0's DNS record when there are several ranks."""
    if view.replicas < 2 or not command:
        return list(command)
    return ["/bin/sh", "-c", RENDEZVOUS_WAIT, "cairn-rendezvous", *command]


def training_env(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """torchrun / Megatron-style launcher env. One pod per replica ("node"); rank = completion index.

    WORLD_SIZE and RANK count pods (one process per pod, as locally). A launcher inside the pod
    (torchrun --nnodes=$NNODES --nproc_per_node=$NPROC_PER_NODE --node_rank=$NODE_RANK
    --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT) uses the NNODES / NPROC_PER_NODE pair.
    """
    service = object_name(view.id)
    master = f"{job_name(view.id, view.attempt)}-0.{service}"
    nproc = str(nproc_per_node(view))
    fixed = {
        "HOME": WORK_HOME,  # (a spec's own HOME wins)
        **(view.network.get("env") or {}),  # the pool's network profile (NCCL_IB_HCA, ...)
        **user_env(view, set(TRAINING_RESERVED)),
        **cairn_env(view, options),
        # Pod DNS of index 0: <job>-0.<headless service> (the Job sets hostname and subdomain).
        "MASTER_ADDR": master,
        "MASTER_PORT": str(MASTER_PORT),
        "WORLD_SIZE": str(view.replicas),
        "NNODES": str(view.replicas),
        "NPROC_PER_NODE": nproc,
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        # a bare `torchrun train.py` reads its options from PET_<OPTION>
        "PET_NNODES": str(view.replicas),
        "PET_NPROC_PER_NODE": nproc,
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": str(MASTER_PORT),
        "CAIRN_CHECKPOINT_DIR": CHECKPOINT_DIR,
        "CAIRN_RENDEZVOUS_WAIT_SECONDS": str(RENDEZVOUS_WAIT_SECONDS),
    }
    index_path = f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"
    return _env_list(fixed) + [
        _field_env("RANK", index_path),
        _field_env("NODE_RANK", index_path),
        _field_env("PET_NODE_RANK", index_path),
        _field_env("CAIRN_REPLICA", index_path),
    ]


def checkpoint_claim_name(workload_id: int) -> str:
    return f"cairn-{workload_id}-checkpoints"


def shm_size_mb(view: WorkloadView) -> int:
    """/dev/shm of a training pod: half its memory request (DataLoader workers and NCCL need far
    more than the container default of 64 MiB; a memory-backed emptyDir counts against the limit)."""
    return max(MIN_SHM_MB, view.memory_mb // 2)


def training_storage(view: WorkloadView, options: ClusterOptions) -> tuple[list[dict], list[dict], list[dict]]:
    """(objects to create, volumes, volume mounts): the checkpoint volume kept across attempts and a
    memory-backed /dev/shm."""
    objects: list[dict] = []
    if options.checkpoint_claim:
        claim, sub_path = options.checkpoint_claim, f"{view.project}/{view.id}"
    else:
        claim, sub_path = checkpoint_claim_name(view.id), ""
        # One replica needs no ReadWriteMany, which most default classes cannot provide (its claim
        # would stay Pending): ReadWriteOnce moves with the pod from node to node between attempts.
        modes = ["ReadWriteMany"] if view.replicas > 1 else ["ReadWriteOnce"]
        spec: dict = {"accessModes": modes, "resources": {"requests": {"storage": options.checkpoint_storage}}}
        if options.storage_class:
            spec["storageClassName"] = options.storage_class
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": _meta(view, claim, options), "spec": spec})
    home_volumes, home_mounts, _ = home_pieces(view, options)
    volumes = [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}}, *home_volumes]
    checkpoint_mount: dict = {"name": "checkpoints", "mountPath": CHECKPOINT_DIR}
    if sub_path:
        checkpoint_mount["subPath"] = sub_path
    return objects, volumes, [checkpoint_mount, *home_mounts]


def training_manifests(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """(Checkpoint PVC,) headless Service, (PodGroup,) Indexed Job — in creation order."""
    name = job_name(view.id, view.attempt)
    service = object_name(view.id)
    attempt_label = {LABEL_ATTEMPT: str(view.attempt)}
    storage, volumes, mounts = training_storage(view, options)
    container: dict = {"env": training_env(view, options), "ports": [{"name": "rendezvous", "containerPort": MASTER_PORT}],
                       "volumeMounts": mounts}
    if view.run_env:
        container["envFrom"] = run_env_from(view)
    if view.spec.get("command"):
        container["command"] = rendezvous_command(view, list(view.spec["command"]))
    network = view.network or {}
    if network.get("resources"):  # extended resources (rdma/...): limits only, requests follow
        base = resources(view, options)
        container["resources"] = {**base, "limits": {**base["limits"], **{
            name: str(amount) for name, amount in network["resources"].items()}}}
    if network.get("capabilities"):
        container["securityContext"] = container_security_context(network["capabilities"])
    working_dir = view.spec.get("working_dir")
    container["workingDir"] = working_dir if isinstance(working_dir, str) and working_dir.startswith("/") else WORK_HOME
    extra: dict = {"subdomain": service}
    pod_annotations: dict[str, str] = {}
    objects: list[dict] = [*run_secret(view, options), *storage, *rank_network_policy(view, options), {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(view, service, options),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # ranks must resolve before any pod is "ready"
            "selector": selector_labels(view),
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
        },
    }]
    if options.volcano:
        extra["schedulerName"] = "volcano"
        pod_annotations[VOLCANO_GROUP_ANNOTATION] = name
        objects.append(podgroup_manifest(view, options))
    if network.get("networks"):
        pod_annotations[MULTUS_ANNOTATION] = ",".join(network["networks"])
    if network.get("runtime_class_name"):
        extra["runtimeClassName"] = network["runtime_class_name"]
    placement = gated_placement(view)
    if placement:
        extra["schedulingGates"] = [{"name": PLACEMENT_GATE}]
        pod_annotations[PLACEMENT_ANNOTATION] = placement_annotation(placement)
    job_labels = dict(attempt_label)
    if options.kueue_queue:
        job_labels[KUEUE_QUEUE_LABEL] = options.kueue_queue
    template_meta: dict = {"labels": {**workload_labels(view), **attempt_label}}
    if pod_annotations:
        template_meta["annotations"] = pod_annotations
    job_spec: dict = {
        "completionMode": "Indexed",
        "completions": view.replicas,
        "parallelism": view.replicas,
        "backoffLimit": 0,  # a failed replica fails the attempt (gang); Cairn decides on restarts
        # A pod ended by a disruption (drain / eviction, kube-scheduler preemption, a lost node's
        # taint eviction or pod GC, kubelet shutdown: condition DisruptionTarget) is no failure of
        # the job: not counted, so the Job does not fail; Cairn requeues the whole gang without
        # spending a restart (reconciler). The pod is only replaced once it is terminal.
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]},
        "podReplacementPolicy": "Failed",
        "ttlSecondsAfterFinished": FINISHED_JOB_TTL_SECONDS,  # kept a week for its logs
        "template": {
            "metadata": template_meta,
            "spec": pod_spec(view, options, container=container, restart_policy="Never", volumes=volumes, **extra),
        },
    }
    if options.kueue_queue:
        job_spec["suspend"] = True  # Kueue admits (unsuspends) it
    if view.active_deadline_seconds:
        # The run-time limit: the Job controller terminates the pods (SIGTERM, their grace period)
        # and fails the Job with reason DeadlineExceeded, which the reconciler maps back.
        job_spec["activeDeadlineSeconds"] = view.active_deadline_seconds
    objects.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(view, name, options, **job_labels),
                    "spec": job_spec})
    return objects


def podgroup_manifest(view: WorkloadView, options: ClusterOptions) -> dict:
    """Volcano gang: the pods of one attempt are bound all together or not at all."""
    per_replica = resources(view, options)["limits"]
    total: dict[str, str] = {
        "cpu": f"{view.cpu_milli * view.replicas}m",
        "memory": f"{view.memory_mb * view.replicas}Mi",
    }
    for name, value in per_replica.items():
        if name not in ("cpu", "memory", "ephemeral-storage"):
            total[name] = str(int(value) * view.replicas)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": _meta(view, job_name(view.id, view.attempt), options, **{LABEL_ATTEMPT: str(view.attempt)}),
        "spec": {"minMember": view.replicas, "minResources": total, "queue": options.volcano_queue},
    }


# -- notebook ------------------------------------------------------------------------------------

def notebook_manifests(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """Secret (token), PVC (home), Service, StatefulSet — in creation order."""
    name = object_name(view.id)
    claim = home_claim_name(view.id)
    pvc_spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": options.notebook_storage}}}
    if options.storage_class:
        pvc_spec["storageClassName"] = options.storage_class
    # Served under Cairn's proxy path (apps/notebooks/proxy.py); the token comes from JUPYTER_TOKEN
    # (the Secret) and never reaches the page (JUPYTERLAB_LAUNCHER).
    command = [
        "python", "-c", JUPYTERLAB_LAUNCHER, "--no-browser", "--ip=0.0.0.0", f"--port={NOTEBOOK_PORT}",
        "--ServerApp.port_retries=0", f"--ServerApp.root_dir={NOTEBOOK_HOME}",
        f"--ServerApp.base_url={NOTEBOOK_PROXY_PREFIX}{view.project}/{view.id}/",
    ]
    image = options.notebook_image
    if ide_of(view) == "vscode":
        image = options.vscode_notebook_image
        # code-server from the image (platform/images/notebook/Dockerfile has it on PATH), with the
        # token as its credential, as on the local backend (CODE_SERVER_LAUNCHER); it serves at /
        # and Cairn's proxy strips its prefix.
        command = ["/bin/sh", "-c", CODE_SERVER_LAUNCHER, "code-server", "--auth", "password",
                   "--bind-addr", f"0.0.0.0:{NOTEBOOK_PORT}", "--disable-telemetry", "--disable-update-check",
                   "--disable-workspace-trust", NOTEBOOK_HOME]
    env = _env_list({**user_env(view, {"HOME", "JUPYTER_TOKEN", "PORT"}), **cairn_env(view, options),
                     "HOME": NOTEBOOK_HOME, "CAIRN_REPLICA": "0"})
    env.append({"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}})
    container = {
        "image": view.spec.get("image") or image,
        "command": command,
        "env": env,
        "workingDir": NOTEBOOK_HOME,
        "ports": [{"name": "http", "containerPort": NOTEBOOK_PORT}],
        "volumeMounts": [{"name": "home", "mountPath": NOTEBOOK_HOME}],
        "readinessProbe": {"tcpSocket": {"port": NOTEBOOK_PORT}, "periodSeconds": 5},
    }
    if view.run_env:
        container["envFrom"] = run_env_from(view)
    volumes = [{"name": "home", "persistentVolumeClaim": {"claimName": claim}}]
    return [
        *run_secret(view, options),
        {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(view, name, options), "type": "Opaque",
         "stringData": {"token": view.notebook_token}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(view, claim, options), "spec": pvc_spec},
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(view, name, options), "spec": {
            "selector": selector_labels(view),
            "ports": [{"name": "http", "port": NOTEBOOK_PORT, "targetPort": NOTEBOOK_PORT}],
        }},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(view, name, options), "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": selector_labels(view)},
            "template": {
                "metadata": {"labels": workload_labels(view)},
                "spec": pod_spec(view, options, container=container, restart_policy="Always", volumes=volumes),
            },
        }},
    ]


# -- deployment ----------------------------------------------------------------------------------

def deployment_manifests(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """Service, PodDisruptionBudget, Deployment (and a HorizontalPodAutoscaler, autoscaling/v2,
    when the cluster's options ask for one) — in creation order.

    The Deployment's replicas are the admitted ones; Cairn's autoscaler changes them (through the
    scheduler) and the reconciler patches the Deployment. An admin's HPA scales between `replicas`
    and spec `max_replicas` (default: the same).
    """
    name = object_name(view.id)
    port = int(view.spec.get("port") or DEPLOYMENT_PORT)
    home_volumes, home_mounts, home_env = home_pieces(view, options)
    env = _env_list({**home_env, **user_env(view, {"PORT"}), **cairn_env(view, options), "PORT": str(port)})
    env.append(_field_env("CAIRN_REPLICA", "metadata.name"))
    container: dict = {
        "env": env,
        "workingDir": WORK_HOME,
        "volumeMounts": home_mounts,
        "ports": [{"name": "http", "containerPort": port}],
        # The same readiness check as the local reconciler's (apps/deployments/readiness.py).
        "readinessProbe": {"httpGet": {"path": readiness_path(view.spec), "port": port}, "periodSeconds": 2},
    }
    if view.run_env:
        container["envFrom"] = run_env_from(view)
    if view.spec.get("command"):
        container["command"] = list(view.spec["command"])
    max_replicas = max(view.replicas, int(view.spec.get("max_replicas") or view.replicas), 1)
    hpa = [
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": _meta(view, name, options),
         "spec": {
             "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
             "minReplicas": max(1, view.replicas),
             "maxReplicas": max_replicas,
             "metrics": [{"type": "Resource", "resource": {
                 "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
         }},
    ] if options.deployment_hpa else []
    return [
        *run_secret(view, options),
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(view, name, options), "spec": {
            "selector": selector_labels(view),
            "ports": [{"name": "http", "port": 80, "targetPort": port}],
        }},
        # Voluntary disruptions (a drain, the cluster autoscaler) take down at most what a rolling
        # update may: the serving replicas stay up while nodes are drained one by one.
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(view, name, options), "spec": {
            "maxUnavailable": max(1, view.max_unavailable),
            "selector": {"matchLabels": selector_labels(view)},
        }},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(view, name, options), "spec": {
            "replicas": view.replicas,
            "selector": {"matchLabels": selector_labels(view)},
            # No surge of the controller's own: Cairn's scheduler admits a surge (as more replicas).
            "strategy": deployment_strategy(view.max_unavailable),
            "template": {
                "metadata": {"labels": workload_labels(view),
                             "annotations": {ANNOTATION_REVISION: str(view.revision)}},
                "spec": pod_spec(view, options, container=container, restart_policy="Always", volumes=home_volumes),
            },
        }},
        *hpa,
    ]


def deployment_strategy(max_unavailable: int, max_surge: int = 0) -> dict:
    """The Deployment controller's RollingUpdate: `max_surge` pods above the replicas (only a surge
    Cairn's scheduler admitted), `max_unavailable` below (at least 1 without a surge: the controller
    could replace nothing with both 0, which the API refuses)."""
    max_surge = max(0, max_surge)
    unavailable = max(0, max_unavailable) if max_surge else max(1, max_unavailable)
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": max_surge}}


def canary_name(workload_id: int) -> str:
    return f"{object_name(workload_id)}-canary"


def canary_selector(workload_id: int) -> dict[str, str]:
    return {LABEL_CANARY: str(workload_id)}


def canary_manifests(view: WorkloadView, options: ClusterOptions, *, main_template: dict, fresh_template: dict,
                     revision: int) -> list[dict]:
    """A canary of a deployment: Service + Deployment `cairn-<id>-canary` with one pod running
    `revision` (the pod template of the main Deployment, `main_template` as stored, with what the
    freshly built `fresh_template` runs: revised_template). Its pods are labelled LABEL_CANARY and
    not LABEL_WORKLOAD, so neither the main Deployment's selector nor the main Service matches
    them: the gateway reaches the canary through its own Service and gives it the canary weight."""
    name = canary_name(view.id)
    port = int(view.spec.get("port") or DEPLOYMENT_PORT)
    template = revised_template(main_template, fresh_template, revision)
    labels = {k: v for k, v in ((template.get("metadata") or {}).get("labels") or {}).items() if k != LABEL_WORKLOAD}
    template = {**template, "metadata": {**template["metadata"], "labels": {**labels, **canary_selector(view.id)}}}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(view, name, options), "spec": {
            "selector": canary_selector(view.id),
            "ports": [{"name": "http", "port": 80, "targetPort": port}],
        }},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(view, name, options), "spec": {
            "replicas": 1,
            "selector": {"matchLabels": canary_selector(view.id)},
            "strategy": deployment_strategy(1),
            "template": template,
        }},
    ]


def deployment_progress(obj: dict | None) -> dict:
    """A Deployment as observed: the revision of its pod template, its replicas, the ready ones,
    and whether the controller has finished rolling the template out (every pod updated and
    ready, no old one left, the latest spec observed)."""
    obj = obj or {}
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    template = spec.get("template") or {}
    revision = ((template.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_REVISION)
    replicas = int(spec.get("replicas") or 0)
    observed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 1)
    counts = [int(status.get(key) or 0) for key in ("replicas", "updatedReplicas", "readyReplicas")]
    return {"revision": int(revision) if revision and revision.isdigit() else None, "replicas": replicas,
            "updated": counts[1], "ready": counts[2], "complete": bool(obj) and observed and counts == [replicas] * 3}


@dataclass(frozen=True)
class DeploymentLayout:
    """How a deployment's admitted replicas are laid out on the cluster during a rollout."""

    main_replicas: int  # the main Deployment's spec.replicas
    canary_revision: int | None  # the revision of the canary Deployment (None: there is none)
    strategy: dict  # the main Deployment's spec.strategy
    template_ready: bool  # may the main pod template run the stable revision now


def deployment_layout(*, admitted: int, stable: int, canary: int | None, surge: int, surge_wanted: int,
                      max_unavailable: int, running_canary: int | None, main_complete: bool) -> DeploymentLayout:
    """Cairn's rollout state -> the main and canary Deployments (pure; the reconciler applies it).

    - A canary (`canary`, with at least 2 admitted replicas: a single-replica deployment's canary
      waits for its surge replica) is a Deployment of its own with one pod; the main one has the
      other replicas.
    - A promoted canary (`running_canary` == `stable`, no canary any more) keeps its pod until the
      main Deployment has rolled the revision out (`main_complete`): the main one stays one replica
      short meanwhile, so the deployment never runs more pods than admitted.
    - A rolling update's admitted surge is the controller's maxSurge, not more replicas: the
      controller starts the surge pods of the new revision and ends with `replicas` pods, every one
      of them new (none started only to be stopped).
    - With `max_unavailable` 0 the new template waits for the whole surge to be admitted."""
    canary_revision = canary if canary is not None and admitted >= 2 else None
    if canary_revision is None and canary is None and running_canary == stable and not main_complete and admitted >= 2:
        canary_revision = stable  # promoted: serves until the main Deployment runs it everywhere
    slot = 1 if canary_revision is not None else 0
    rolling_surge = max(0, surge - slot)  # a single-replica canary's surge is its canary pod
    return DeploymentLayout(
        main_replicas=max(0, admitted - slot - rolling_surge), canary_revision=canary_revision,
        strategy=deployment_strategy(max_unavailable, rolling_surge),
        template_ready=not (canary is None and surge_wanted > surge and max_unavailable < 1),
    )


# What a new revision changes in a Deployment's container (the rest of the pod template, e.g.
# the attempt's run Secret and the placement, stays as it was created).
REVISION_CONTAINER_FIELDS = ("command", "image", "env", "resources")


def revised_template(template: dict, fresh: dict, revision: int) -> dict:
    """The pod template `template` (a Deployment's, as stored) running what the freshly built
    template `fresh` runs: its container's REVISION_CONTAINER_FIELDS and the revision annotation."""
    new_main = next(c for c in fresh["spec"]["containers"] if c["name"] == CONTAINER)
    containers = []
    for container in template["spec"]["containers"]:
        if container.get("name") == CONTAINER:
            container = {k: v for k, v in container.items() if k not in REVISION_CONTAINER_FIELDS}
            container.update({k: new_main[k] for k in REVISION_CONTAINER_FIELDS if k in new_main})
        containers.append(container)
    metadata = dict(template.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), ANNOTATION_REVISION: str(revision)}
    return {**template, "metadata": metadata, "spec": {**template["spec"], "containers": containers}}


def workload_manifests(view: WorkloadView, options: ClusterOptions) -> list[dict]:
    """Every object of the workload's current attempt, in the order to create them."""
    builders = {"training": training_manifests, "notebook": notebook_manifests, "deployment": deployment_manifests}
    try:
        builder = builders[view.kind]
    except KeyError:
        raise ValueError(f"Unknown workload kind '{view.kind}'.") from None
    return with_storage(builder(view, options), view, options, namespace=namespace_for(view.project, options),
                        container=CONTAINER)
