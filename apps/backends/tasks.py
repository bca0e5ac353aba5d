"""Celery entry points of the backends app: thin, idempotent, one service each."""
from celery import shared_task

from .services import workload_dispatch, workload_stop_signal


@shared_task(name="cairn.workload_dispatch", ignore_result=True)
def workload_dispatch_task(workload_id: int) -> None:
    workload_dispatch(workload_id=workload_id)


@shared_task(name="cairn.workload_stop", ignore_result=True)
def workload_stop_task(workload_id: int) -> None:
    workload_stop_signal(workload_id=workload_id)
