"""A sweep's waiting trials say why they wait (issue 46, item 10): the trials endpoint carries
their workload's waiting_on and pending_reason while it is queued, nothing once it runs."""
import pytest

from apps.scheduling.services import scheduling_cycle
from apps.sweeps.driver import sweep_drive
from tests.factories import NodeFactory, QuotaFactory

from .helpers import make_sweep

pytestmark = pytest.mark.django_db


def test_a_trial_waiting_on_quota_says_so_and_a_running_one_does_not(project, pool, alice, client_for):
    NodeFactory(pool=pool, name="box", cpu_milli_allocatable=4000, memory_mb_allocatable=8192)
    # Room for one 0.5-CPU trial within the project's nominal, and nothing to borrow for the second.
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=0, nominal_cpu_milli=500, nominal_memory_mb=4096)
    sweep = make_sweep(project, alice, max_concurrent=2)
    sweep_drive(sweep_id=sweep.pk)
    scheduling_cycle()
    url = f"/api/v1/projects/{project.slug}/sweeps/{sweep.pk}/trials/"
    rows = client_for(alice).get(url).json()["results"]
    admitted = [r for r in rows if r["workload"]["status"] == "admitted"]
    waiting = [r for r in rows if r["workload"]["status"] == "queued"]
    assert len(admitted) == 1 and len(waiting) == 1, rows
    assert waiting[0]["workload"]["waiting_on"] == "quota_lendable"
    assert "quota" in waiting[0]["workload"]["pending_reason"].lower()
    assert (admitted[0]["workload"]["waiting_on"], admitted[0]["workload"]["pending_reason"]) == (None, "")

