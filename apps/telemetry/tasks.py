"""Celery entry points of telemetry: thin, idempotent, one service each."""
from celery import shared_task

from .services import telemetry_compact, telemetry_scrape


@shared_task(name="telemetry.compact", ignore_result=True)
def compact() -> None:
    telemetry_compact()


@shared_task(name="telemetry.scrape", ignore_result=True)
def scrape(node: str, url: str) -> None:
    telemetry_scrape(node=node, url=url)
