"""Every writer of a deployment's scale row locks the workload's row first. The scheduler's cycle
(autoscaler, scale-up waits) runs in one transaction while the gateway's cold start scales from
another connection: with the rows locked in opposite orders, PostgreSQL found a deadlock and the
held request got a 500 (seen in CI)."""
import threading
import time

import pytest
from django.db import close_old_connections, transaction

from apps.deployments.models import DeploymentScale
from apps.deployments.services import deployment_autoscale, deployment_scale_to, deployment_scale_wait
from apps.workloads.choices import WorkloadStatus
from apps.workloads.lifecycle import workload_locked
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _running_deployment():
    workload = WorkloadFactory(kind="deployment", status=WorkloadStatus.RUNNING, replicas=1,
                               spec={"command": ["python", "-c", "pass"], "env": {},
                                     "autoscaling": {"min_replicas": 1, "max_replicas": 3}})
    DeploymentScale.objects.create(workload=workload, desired=1, pending_reason="old")
    return workload


def _scale_up_wait(workload):
    deployment_scale_wait(workload_id=workload.pk, reason="the quota is full", waiting_on="quota")


def _autoscale(workload):
    deployment_autoscale(now=time.time())
    assert DeploymentScale.objects.get(workload=workload).decision, "the autoscaler passed the deployment by"


@pytest.mark.parametrize("cycle_step", [_scale_up_wait, _autoscale], ids=["scale-up wait", "autoscaler"])
def test_a_scale_in_the_gateway_during_the_schedulers_cycle_waits_instead_of_deadlocking(cycle_step):
    workload = _running_deployment()
    step_done, errors = threading.Event(), []

    def cycle():  # the scheduler's transaction: the step, then more work that locks the workload
        try:
            with transaction.atomic():
                cycle_step(workload)
                step_done.set()
                time.sleep(0.6)  # the gateway's scale runs meanwhile
                workload_locked(workload.pk)
        except Exception as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)
        finally:
            step_done.set()
            close_old_connections()

    def gateway():
        step_done.wait(10)
        try:
            deployment_scale_to(workload_id=workload.pk, desired=2, reason="a request arrived")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=cycle), threading.Thread(target=gateway)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert DeploymentScale.objects.get(workload=workload).desired == 2
