"""B4, storage assumed and never cleaned: the storage preflight of a cluster check, checkpoint
claims that a default (ReadWriteOnce) class can satisfy, per-attempt Secrets owned by their Job,
and finished workloads that leave nothing behind (Secrets at once, the rest after the retention).
Against the emulated API server here; test_real_blockers.py runs the clean-up on a real one."""
from django.utils import timezone

from apps.backends.kubernetes.client import storage_report
from apps.backends.kubernetes.manifests import ClusterOptions, workload_manifests
from apps.backends.services import workload_dispatch
from apps.workloads.models import Workload

from .test_manifests import by_kind, pod_template, view

NS = "cairn-vision"


def sc(name, provisioner, default=False):
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {"metadata": {"name": name, "annotations": annotations}, "provisioner": provisioner}


def test_the_storage_preflight_names_the_default_class_and_what_it_offers():
    name, text = storage_report([sc("gp3", "ebs.csi.aws.com", default=True), sc("efs", "efs.csi.aws.com")])
    assert name == "gp3" and "ReadWriteOnce only" in text and "checkpoint_claim" in text and "efs" in text
    name, text = storage_report([sc("files", "nfs.csi.k8s.io", default=True)])
    assert name == "files" and "ReadWriteMany supported" in text
    assert "unknown" in storage_report([sc("x", "example.com/fancy", default=True)])[1]
    name, text = storage_report([sc("slow", "example.com/fancy")])
    assert name == "" and "no default StorageClass" in text and "Pending" in text


def test_the_cluster_check_reports_the_storage_preflight(emulator, k8s_cluster):
    from apps.clusters.services import kubernetes_cluster_check

    emulator.create("storageclasses", {"metadata": {"name": "local", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"})
    credential = kubernetes_cluster_check(cluster=k8s_cluster)
    assert credential.check_ok and "default StorageClass local (rancher.io/local-path)" in credential.check_detail


def test_a_single_replica_checkpoint_claim_is_read_write_once_and_volumes_are_not_chowned_each_start():
    one = by_kind(workload_manifests(view(replicas=1), ClusterOptions()))["PersistentVolumeClaim"]
    many = by_kind(workload_manifests(view(replicas=4), ClusterOptions()))["PersistentVolumeClaim"]
    assert one["spec"]["accessModes"] == ["ReadWriteOnce"] and many["spec"]["accessModes"] == ["ReadWriteMany"]
    spec = pod_template(workload_manifests(view(), ClusterOptions()))["spec"]
    assert spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"


def _names(emulator, plural, workload_id):
    return {o["metadata"]["name"] for o in emulator.list(plural, NS, f"cairn.dev/workload={workload_id}")}


def test_an_attempts_run_secret_is_owned_by_its_job(emulator, make_workload):
    workload = make_workload(kind="training", replicas=2)
    workload_dispatch(workload_id=workload.pk)
    job = emulator.get("jobs", NS, f"cairn-{workload.pk}-1")
    secret = emulator.get("secrets", NS, f"cairn-{workload.pk}-1-run")
    assert secret["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": job[
        "metadata"]["name"], "uid": job["metadata"]["uid"]}]


def test_a_finished_workload_loses_its_secrets_at_once_and_the_rest_after_the_retention(
        emulator, make_workload, reconciler, settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "RETENTION_SECONDS": 3600}
    workload = make_workload(kind="training", replicas=2)
    workload_dispatch(workload_id=workload.pk)
    assert _names(emulator, "secrets", workload.pk) and _names(emulator, "persistentvolumeclaims", workload.pk)
    Workload.objects.filter(pk=workload.pk).update(status="succeeded", finished_at=timezone.now(),
                                                   runtime={"alive": False})
    assert reconciler.clean_finished() == 1
    assert _names(emulator, "secrets", workload.pk) == set()  # credentials: at once
    assert _names(emulator, "services", workload.pk) == {f"cairn-{workload.pk}"}  # the rest: kept for now
    assert reconciler.clean_finished() == 0  # once
    Workload.objects.filter(pk=workload.pk).update(finished_at=timezone.now() - timezone.timedelta(hours=2))
    assert reconciler.clean_finished() == 1
    for plural in ("secrets", "services", "persistentvolumeclaims", "jobs", "networkpolicies"):
        assert _names(emulator, plural, workload.pk) == set(), plural
    assert Workload.objects.get(pk=workload.pk).runtime["cleaned"] == "all"
    assert reconciler.clean_finished() == 0


def test_a_stopped_notebook_keeps_its_home_and_set_but_not_its_run_secret(emulator, make_workload, reconciler,
                                                                          settings):
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "RETENTION_SECONDS": 0}
    workload = make_workload(kind="notebook", spec={"env": {}})
    workload_dispatch(workload_id=workload.pk)
    Workload.objects.filter(pk=workload.pk).update(status="stopped", finished_at=timezone.now(),
                                                   runtime={"alive": False})
    assert reconciler.clean_finished() == 1
    assert _names(emulator, "secrets", workload.pk) == {f"cairn-{workload.pk}"}  # its token; the run one is gone
    assert emulator.get("statefulsets", NS, f"cairn-{workload.pk}") is not None
    assert emulator.get("persistentvolumeclaims", NS, f"cairn-{workload.pk}-home") is not None
