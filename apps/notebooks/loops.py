"""The idle culler's loop, shared by `manage.py run_culler` (server mode) and `manage.py
run_embedded` (a thread of its own): one notebook_cull_pass every NOTEBOOK_CULL_INTERVAL seconds."""
from __future__ import annotations

import threading

from django.conf import settings

from apps.core.loops import run_loop

from .services import notebook_cull_pass


def run_culler_loop(*, stop: threading.Event, interval: float | None = None) -> None:
    run_loop(name="culler", work=notebook_cull_pass,
             interval=interval if interval is not None else float(settings.CAIRN["NOTEBOOK_CULL_INTERVAL"]), stop=stop)
