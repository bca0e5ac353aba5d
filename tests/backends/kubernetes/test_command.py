"""`manage.py run_reconciler --once --backend kubernetes` lists every registered cluster and acts."""
from io import StringIO

from django.core.management import call_command

from apps.clusters.models import Node
from apps.workloads.models import Workload


def test_run_reconciler_once_for_kubernetes(emulator, make_workload, kubelet):
    kubelet.add_node("gpu-a")
    emulator.create("namespaces", {"metadata": {"name": "cairn-system"}})  # where its Lease lives
    workload = make_workload()  # ADMITTED, its dispatch task lost
    out = StringIO()
    call_command("run_reconciler", "--once", "--backend", "kubernetes", stdout=out)
    assert "kubernetes: acted on 1 workload(s)" in out.getvalue()
    # it took the cluster's Lease for the pass and gave it back (once.py; test_once_lease.py)
    assert not emulator.get("leases", "cairn-system", "cairn-reconciler")["spec"].get("holderIdentity")
    assert Workload.objects.get(pk=workload.pk).status == "running"
    assert Node.objects.filter(name="gpu-a", cluster__name="gpu-cluster").exists()
