"""`manage.py run_reconciler --once --backend kubernetes` lists every registered cluster and acts."""
from io import StringIO

from django.core.management import call_command

from apps.clusters.models import Node
from apps.workloads.models import Workload


def test_run_reconciler_once_for_kubernetes(emulator, make_workload, kubelet):
    kubelet.add_node("gpu-a")
    workload = make_workload()  # ADMITTED, its dispatch task lost
    out = StringIO()
    call_command("run_reconciler", "--once", "--backend", "kubernetes", stdout=out)
    assert "kubernetes: acted on 1 workload(s)" in out.getvalue()
    assert Workload.objects.get(pk=workload.pk).status == "running"
    assert Node.objects.filter(name="gpu-a", cluster__name="gpu-cluster").exists()
