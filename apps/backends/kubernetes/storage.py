"""Pure manifest pieces for apps/storage: project volumes as ReadWriteMany claims, mounted into
every pod template of a workload (read-only where the spec says so); datasets read-only (S3
versions through the node cache, filled by an init container; NFS exports and host paths as
pod volumes); a served model as the artifacts claim's subPath.

The node cache on Kubernetes (docs/data.md, "On Kubernetes"): a hostPath folder on each node
(`dataset_cache_path`), filled by an init container that runs Cairn's own image and the same
apps/storage/cachefill.py as the local backend, from a per-attempt Secret holding the versions'
manifests and credentials. An init container rather than a cache-agent DaemonSet: the fill
happens exactly where and when a pod that needs it is placed, with nothing running in between;
pods on one node share the folder, so the flock that makes concurrent fills wait works across
them; a failed fill shows as the pod's Init error and the main container never starts on a
partial copy.

How Cairn learns what a node's cache holds (for data-aware placement): the init container writes
its report (apps/storage/cachefill.py `report`: the versions complete in the node's folder, or
those it filled and evicted when the list is too long) to its termination message; the kubelet
copies it into the pod's status, and the reconciler, which watches the pods anyway, records it
for the pod's node (`cache_report` below, apps.storage.services.node_cache_report). Nothing in
the pod needs a Cairn credential, a route to Cairn's API or a right on Node objects.

`with_storage(objects, view, options)` is the one hook manifests.workload_manifests calls: it
puts the claims first (they must exist before the pods that mount them) and adds the volumes
and mounts to the main container of each pod template. A volume's claim is the project's, not
the workload's: labelled with the project only, so that any workload of the project adopts it.
"""
from __future__ import annotations

import json

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_PROJECT = "cairn.dev/project"
LABEL_VOLUME = "cairn.dev/volume"
POD_OWNERS = ("Job", "StatefulSet", "Deployment")
CACHE_MOUNT = "/var/lib/cairn/dataset-cache"  # where the init container sees the node's cache folder
FILL_CONTAINER = "fill-datasets"
FILL_REPORT = "/dev/termination-log"  # the kubelet's default termination message path
ARTIFACTS = "artifacts"  # the project's artifact store (apps.storage.mounts.ARTIFACTS_VOLUME)


def volume_claim_name(name: str) -> str:
    return f"cairn-vol-{name}"


def _claimed(view) -> list[dict]:
    """The project volumes the pods use: the spec's, plus the artifact store when it serves a model."""
    entries = list(view.spec.get("volumes") or [])
    if isinstance(view.spec.get("model"), dict) and all(e["name"] != ARTIFACTS for e in entries):
        entries.append({"name": ARTIFACTS})
    return entries


def volume_claims(view, options, namespace: str) -> list[dict]:
    claims = []
    for entry in _claimed(view):
        spec: dict = {"accessModes": ["ReadWriteMany"],
                      "resources": {"requests": {"storage": f"{int(view.volume_sizes.get(entry['name'], 1))}Gi"}}}
        if options.volume_storage_class:
            spec["storageClassName"] = options.volume_storage_class
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": volume_claim_name(entry["name"]), "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: "cairn", LABEL_PROJECT: view.project, LABEL_VOLUME: entry["name"]},
        }, "spec": spec})
    return claims


def pod_volumes(view) -> tuple[list[dict], list[dict]]:
    """(pod volumes, container volumeMounts) for the spec's volumes."""
    volumes, mounts = [], []
    for i, entry in enumerate(view.spec.get("volumes") or []):
        name = f"vol-{i}"
        read_only = bool(entry.get("read_only"))
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": volume_claim_name(entry["name"]),
                                                                 "readOnly": read_only}})
        mounts.append({"name": name, "mountPath": entry["mount"], "readOnly": read_only})
    served = view.spec.get("model")
    if isinstance(served, dict):  # the version's folder of the artifact store, read-only
        volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": volume_claim_name(ARTIFACTS),
                                                                    "readOnly": True}})
        mounts.append({"name": "model", "mountPath": served["mount"], "readOnly": True,
                       "subPath": f"models/{served['name']}/{int(served['version'])}"})
    return volumes, mounts


def datasets_secret_name(view) -> str:
    return f"cairn-{view.id}-{view.attempt}-datasets"


def dataset_pieces(view, options, namespace: str) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """(objects, pod volumes, container volumeMounts, init containers) for the spec's datasets."""
    entries = list(view.datasets or ())
    if not entries:
        return [], [], [], []
    objects, volumes, mounts, fills = [], [], [], []
    cache_volume = False
    for i, entry in enumerate(entries):
        name = f"dataset-{i}"
        if entry["source"] == "s3":
            cache_volume = True
            fills.append({"name": f"{entry['name']}@{entry['version']}", "digest": entry["digest"],
                          "manifest": entry.get("manifest") or [], "store": entry.get("store") or {}})
            mounts.append({"name": "dataset-cache", "mountPath": entry["mount"], "readOnly": True,
                           "subPath": f"{entry['digest']}/data"})
        elif entry["source"] == "nfs":
            location = entry.get("location") or {}
            volumes.append({"name": name, "nfs": {"server": location.get("server", ""),
                                                   "path": location.get("path", "/"), "readOnly": True}})
            mounts.append({"name": name, "mountPath": entry["mount"], "readOnly": True})
        else:  # host_path: a directory the pool allows, on every node of the pool
            volumes.append({"name": name, "hostPath": {"path": (entry.get("location") or {}).get("path", "/"),
                                                       "type": "Directory"}})
            mounts.append({"name": name, "mountPath": entry["mount"], "readOnly": True})
    init: list[dict] = []
    if cache_volume:
        volumes.append({"name": "dataset-cache", "hostPath": {"path": options.dataset_cache_path,
                                                              "type": "DirectoryOrCreate"}})
        secret = datasets_secret_name(view)
        volumes.append({"name": "dataset-fill", "secret": {"secretName": secret, "defaultMode": 0o400}})
        objects.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {
            "name": secret, "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: "cairn", LABEL_PROJECT: view.project, "cairn.dev/workload": str(view.id),
                       "cairn.dev/attempt": str(view.attempt)},
        }, "stringData": {"job.json": json.dumps({
            "cache_root": CACHE_MOUNT, "max_bytes": int(options.dataset_cache_gb * 1024**3), "entries": fills,
            "report_path": FILL_REPORT})}})
        init.append({
            "name": FILL_CONTAINER,
            "image": options.cache_image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "/app/apps/storage/cachefill.py", "/var/run/cairn-fill/job.json", "--"],
            "volumeMounts": [{"name": "dataset-cache", "mountPath": CACHE_MOUNT},
                             {"name": "dataset-fill", "mountPath": "/var/run/cairn-fill", "readOnly": True}],
            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
            "terminationMessagePath": FILL_REPORT, "terminationMessagePolicy": "File",  # the cache report
            "securityContext": {"allowPrivilegeEscalation": False, "privileged": False, "runAsNonRoot": True,
                                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        })
    return objects, volumes, mounts, init


def cache_report(pod: dict) -> tuple[str, str, str] | None:
    """(node, report, finished at) of a pod whose fill-datasets init container succeeded and
    left a report; None otherwise."""
    node = (pod.get("spec") or {}).get("nodeName")
    for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if status.get("name") != FILL_CONTAINER:
            continue
        done = (status.get("state") or {}).get("terminated") or {}
        if node and done.get("exitCode") == 0 and done.get("message"):
            return node, done["message"], str(done.get("finishedAt") or "")
    return None


def with_storage(objects: list[dict], view, options, *, namespace: str, container: str = "main") -> list[dict]:
    volumes, mounts = pod_volumes(view)
    extra, data_volumes, data_mounts, init = dataset_pieces(view, options, namespace)
    volumes, mounts = volumes + data_volumes, mounts + data_mounts
    if not volumes:
        return objects
    for obj in objects:
        if obj["kind"] not in POD_OWNERS:
            continue
        pod = obj["spec"]["template"]["spec"]
        pod["volumes"] = [*pod.get("volumes", []), *volumes]
        if init:
            pod["initContainers"] = [*pod.get("initContainers", []), *init]
        for c in pod["containers"]:
            if c["name"] == container:
                c["volumeMounts"] = [*c.get("volumeMounts", []), *mounts]
    return [*volume_claims(view, options, namespace), *extra, *objects]
