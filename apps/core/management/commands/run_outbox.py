import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.core.loops import run_loop, stop_on_signals
from apps.core.outbox import outbox_relay


class Command(BaseCommand):
    help = "Relay committed outbox messages to Celery (retrying while the broker is down)."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.CAIRN["OUTBOX_INTERVAL"])

    def handle(self, *args, interval: float, **options):
        stop = threading.Event()
        stop_on_signals(stop)

        def drain() -> None:
            while outbox_relay() and not stop.is_set():
                pass

        run_loop(name="outbox", work=drain, interval=interval, stop=stop)
