"""Pure manifest pieces for apps/storage: project volumes as ReadWriteMany claims, mounted into
every pod template of a workload (read-only where the spec says so); datasets read-only (S3
versions through the node cache, filled by an init container; NFS exports and host paths
through PersistentVolumes Cairn binds to claims of the project); a served model as the artifacts claim's subPath.

The node cache on Kubernetes (docs/data.md, "On Kubernetes"): a folder on each node
(`dataset_cache_path`, reached through a hostPath PersistentVolume and its claim, so the pods
pass Pod Security "restricted"), filled by an init container that runs Cairn's own image and the same
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

import hashlib
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


def _bound_claim(view, namespace: str, key: str, source: dict, *, access: str) -> tuple[list[dict], str]:
    """A PersistentVolume for an NFS export or a node path, pre-bound to a claim of the project's
    namespace: ([PV, PVC], claim name). Pod Security "restricted" refuses `nfs` and `hostPath`
    volumes in a pod but allows any claim; the PV is cluster-side, created by Cairn, which may
    (its RBAC), so the pods of the namespace never name a host path themselves. One pair per
    (namespace, location), shared by every workload of the project that mounts it; never deleted
    by Cairn (Retain: deleting them never touches the data)."""
    digest = hashlib.sha256(f"{namespace}\0{key}".encode()).hexdigest()[:16]
    pv_name, claim = f"cairn-ds-{digest}", f"cairn-ds-{digest[:12]}"
    labels = {LABEL_MANAGED_BY: "cairn", LABEL_PROJECT: view.project}
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name, "labels": labels},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": [access], "storageClassName": "",
                   "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": namespace, "name": claim},
                   **source}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": claim, "namespace": namespace, "labels": labels},
           "spec": {"accessModes": [access], "storageClassName": "", "volumeName": pv_name,
                    "resources": {"requests": {"storage": "1Gi"}}}}
    return [pv, pvc], claim


def dataset_pieces(view, options, namespace: str) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """(objects, pod volumes, container volumeMounts, init containers) for the spec's datasets.

    Every dataset reaches the pod as a claim (_bound_claim): NFS exports and host paths read-only,
    the node cache's folder read-write for the fill (a hostPath PV is the same folder on whichever
    node the pod lands on)."""
    entries = list(view.datasets or ())
    if not entries:
        return [], [], [], []
    objects, volumes, mounts, fills = [], [], [], []
    cache_volume = False
    for i, entry in enumerate(entries):
        name = f"dataset-{i}"
        location = entry.get("location") or {}
        if entry["source"] == "s3":
            cache_volume = True
            fills.append({"name": f"{entry['name']}@{entry['version']}", "digest": entry["digest"],
                          "manifest": entry.get("manifest") or [], "store": entry.get("store") or {}})
            mounts.append({"name": "dataset-cache", "mountPath": entry["mount"], "readOnly": True,
                           "subPath": f"{entry['digest']}/data"})
            continue
        if entry["source"] == "nfs":
            server, path = location.get("server", ""), location.get("path", "/")
            pair, claim = _bound_claim(view, namespace, f"nfs:{server}:{path}",
                                       {"nfs": {"server": server, "path": path, "readOnly": True}},
                                       access="ReadOnlyMany")
        else:  # host_path: a directory the pool allows, on every node of the pool
            path = location.get("path", "/")
            pair, claim = _bound_claim(view, namespace, f"host:{path}",
                                       {"hostPath": {"path": path, "type": "Directory"}}, access="ReadOnlyMany")
        objects += [o for o in pair if o not in objects]
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
        mounts.append({"name": name, "mountPath": entry["mount"], "readOnly": True})
    init: list[dict] = []
    if cache_volume:
        pair, claim = _bound_claim(view, namespace, f"cache:{options.dataset_cache_path}",
                                   {"hostPath": {"path": options.dataset_cache_path, "type": "DirectoryOrCreate"}},
                                   access="ReadWriteMany")
        objects += pair
        volumes.append({"name": "dataset-cache", "persistentVolumeClaim": {"claimName": claim}})
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
