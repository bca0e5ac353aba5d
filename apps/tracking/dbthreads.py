"""Where tracking's synchronous (ORM) work runs when it is called from an async view.

Under ASGI, Django runs the sync part of every request in a thread of its own that ends with
the request, so a database connection opened there is never used again: each request pays
for a new PostgreSQL connection (a server process fork) whatever CONN_MAX_AGE says. Tracking's
hot endpoints (ingestion, chart reads) are async views that send their sync work to a few
long-lived threads instead (TRACKING_DB_THREADS per server process), whose connections persist
and obey CONN_MAX_AGE like any request's.

Elsewhere (WSGI, Django's sync test client, SQLite) the work runs where Django would have run
it: in the request's own thread, on the request's connection, so it sees the same transaction.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connections

from .conf import setting

T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=setting("TRACKING_DB_THREADS"),
                                           thread_name_prefix="cairn-tracking-db")
        return _executor


def uses_pool(request) -> bool:
    """`request` is a Django request, or None from tracking's own ASGI entry (always ASGI)."""
    return ((request is None or isinstance(request, ASGIRequest)) and setting("TRACKING_DB_THREADS") > 0
            and connections["default"].vendor == "postgresql")


def _release_connections() -> None:
    """What Django does at the end of a request (close_old_connections), without resetting the
    health check of a connection that is fine: close it only when it is broken, left outside
    autocommit or older than CONN_MAX_AGE (0: after every call)."""
    now = time.monotonic()
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if (conn.errors_occurred or (conn.close_at is not None and now >= conn.close_at)
                or conn.get_autocommit() != conn.settings_dict["AUTOCOMMIT"]):
            conn.close_if_unusable_or_obsolete()


def _pooled_call(fn: Callable[..., T], args, kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    finally:
        _release_connections()


async def run_sync(request, fn: Callable[..., T], *args, **kwargs) -> T:
    """Run `fn(*args, **kwargs)` (sync, may use the ORM) for `request`, from async code."""
    if uses_pool(request):
        return await sync_to_async(_pooled_call, thread_sensitive=False, executor=_pool())(fn, args, kwargs)
    return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
