"""Cairn's own deployment (platform/kubernetes, rendered by kustomize as docs/operations.md
says) applied to the real API server with a server-side dry run: every object
is admitted as written (strict field validation: no unknown or duplicate field, no defaulting
surprise), and each pod template passes the namespace's Pod Security level, which the API server
only enforces on pods (a Deployment with a violating template is admitted; its pods are not)."""
import json
import shutil
import subprocess
from urllib.parse import quote

import yaml
from kubernetes.dynamic import DynamicClient

from .controlplane import ROOT, bin_dir

WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def kustomize_build(tmp_path, target: str) -> subprocess.CompletedProcess:
    """`kustomize build platform/<target>` on a copy of the tree, with the secrets.env a site
    writes from secrets.env.example (the overlay's secretGenerator reads it)."""
    tree = tmp_path / "platform"
    shutil.copytree(ROOT / "platform" / "kubernetes", tree / "kubernetes")
    shutil.copytree(ROOT / "platform" / "overlays", tree / "overlays")
    overlay = tree / "overlays" / "production"
    shutil.copy(overlay / "secrets.env.example", overlay / "secrets.env")
    return subprocess.run([str(bin_dir() / "kustomize"), "build", str(tree / target)], capture_output=True,
                          text=True, timeout=60)


def test_the_production_overlay_builds(real_kube, tmp_path):
    """docs/operations.md installs with `kubectl apply -k platform/overlays/production`."""
    out = kustomize_build(tmp_path, "overlays/production")
    assert out.returncode == 0, out.stderr


def test_cairns_manifests_are_admitted_as_written(real_kube, tmp_path):
    """The base (`kubectl apply -k platform/kubernetes`): what every overlay builds on."""
    out = kustomize_build(tmp_path, "kubernetes")
    assert out.returncode == 0, out.stderr
    objects = [obj for obj in yaml.safe_load_all(out.stdout) if obj]
    kinds = {obj["kind"] for obj in objects}
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"} <= kinds, kinds
    dynamic = DynamicClient(real_kube.api)
    plane = real_kube.plane
    refused = []
    pods_checked = 0
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        name = obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        if resource.namespaced:
            assert namespace, f"{obj['kind']}/{name} names no namespace: it would land wherever kubectl points"
        path = resource.path(name=name, namespace=namespace)
        # server-side apply, dry run: admission (Pod Security labels, RBAC escalation checks,
        # validation) runs, nothing is stored
        status, answer = plane.request(
            "PATCH", f"{path}?dryRun=All&fieldManager=cairn-test&force=true&fieldValidation=Strict",
            json.dumps(obj), content_type="application/apply-patch+yaml")
        if status >= 300:
            refused.append(f"{obj['kind']}/{name}: {status} {answer.get('message')}")
            continue
        if obj["kind"] in WORKLOAD_KINDS:
            template = obj["spec"]["template"]
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{name}-dry-run", "labels": template.get("metadata", {}).get("labels", {})},
                   "spec": template["spec"]}
            status, answer = plane.request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods?dryRun=All"
                                           "&fieldValidation=Strict", json.dumps(pod))
            pods_checked += 1
            if status >= 300:
                refused.append(f"pod of {obj['kind']}/{name}: {status} {answer.get('message')}")
    assert not refused, "\n".join(refused)
    assert pods_checked >= 2  # the web/scheduler Deployments and the migrate Job at least
