"""Celery entry points of the backends app: thin, idempotent, one service each."""
from celery import shared_task

from .base import TransientBackendError
from .services import workload_dispatch, workload_stop_signal


# A control plane that fails transiently (Kubernetes 5xx, timeouts) leaves the workload ADMITTED;
# the task is retried with exponential backoff (and the reconciler dispatches it anyway).
@shared_task(name="cairn.workload_dispatch", ignore_result=True, autoretry_for=(TransientBackendError,),
             retry_backoff=2, retry_backoff_max=60, retry_jitter=True, max_retries=8)
def workload_dispatch_task(workload_id: int) -> None:
    workload_dispatch(workload_id=workload_id)


@shared_task(name="cairn.workload_stop", ignore_result=True, autoretry_for=(TransientBackendError,),
             retry_backoff=2, retry_backoff_max=60, retry_jitter=True, max_retries=8)
def workload_stop_task(workload_id: int) -> None:
    workload_stop_signal(workload_id=workload_id)
