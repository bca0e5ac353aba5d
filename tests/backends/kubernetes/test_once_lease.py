"""`run_reconciler --once` respects the leader Lease (apps/backends/kubernetes/once.py), on the
real control plane with Cairn's identity: while a running reconciler leads the cluster a one-shot
pass does nothing there and says who holds it; with the Lease free it takes it, acts, and gives it
back."""
import itertools
import logging

import pytest
from kubernetes import client as k8s

from apps.backends.kubernetes.once import reconcile_once
from apps.backends.kubernetes.reconciler import KubernetesReconciler
from apps.workloads.models import Workload

from .conftest import REAL_TIMEOUTS, eventually

_leases = itertools.count(1)


@pytest.fixture
def lease(settings, real_settings):
    name = f"cairn-once-test-{next(_leases)}"
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "LEASE_NAME": name, "LEASE_SECONDS": 4.0,
                                 "RENEW_DEADLINE_SECONDS": 3.0, "LEASE_RETRY_SECONDS": 0.5}
    return name


def holder(real_kube, name: str) -> str | None:
    return k8s.CoordinationV1Api(real_kube.api).read_namespaced_lease(name, "cairn-system").spec.holder_identity


def test_once_skips_a_cluster_another_reconciler_leads_then_takes_and_releases_a_free_lease(
        real_kube, real_cluster, make_real_workload, lease, caplog):
    steady = KubernetesReconciler(identity="steady", watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"])
    try:
        steady.refresh()
        assert eventually(lambda: steady.clusters[real_cluster.pk].is_leader(), timeout=15), "steady never leads"
        workload = make_real_workload()  # admitted, its dispatch lost: any acting pass dispatches it
        with caplog.at_level(logging.WARNING, logger="apps.backends.kubernetes.once"):
            acted = reconcile_once(identity="one-shot", watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"])
        assert acted == 0 and Workload.objects.get(pk=workload.pk).status == "admitted"
        assert "held by steady" in caplog.text and real_cluster.name in caplog.text
        assert holder(real_kube, lease) == "steady"  # untouched
    finally:
        steady.stop()  # a clean stop: the Lease released
    assert holder(real_kube, lease) is None

    acted = reconcile_once(identity="one-shot", watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"])
    assert acted == 1 and Workload.objects.get(pk=workload.pk).status == "running"
    assert holder(real_kube, lease) is None  # given back at once: a standby need not wait out the lease


def test_once_without_leader_election_acts_alone(real_kube, real_cluster, make_real_workload, lease):
    workload = make_real_workload()
    assert reconcile_once(leader_election=False, watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"]) == 1
    assert Workload.objects.get(pk=workload.pk).status == "running"
