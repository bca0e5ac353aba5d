from celery import shared_task

from .services import scheduling_cycle


@shared_task(name="cairn.scheduling_cycle", ignore_result=True)
def scheduling_cycle_task() -> None:
    scheduling_cycle()
