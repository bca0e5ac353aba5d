"""List + watch caches (the informer pattern, small): one per resource kind per cluster.

An Informer lists its objects (remembering the list's resourceVersion), then watches from that
version, applying ADDED / MODIFIED / DELETED to its cache and remembering the version of every
event. A watch that ends (server timeout) resumes from the last version; a 410 Gone (the version
was compacted away) means list again; every `resync` seconds it lists again anyway, so anything
a watch missed is corrected. Each event sets `wakeup`: the reconciler acts on it early, but it
always decides from the whole cache (level-triggered), never from the event alone.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import urllib3

from .client import ApiError, Clients, Gone, TransientError

logger = logging.getLogger(__name__)


class Informer:
    def __init__(self, clients: Clients, name: str, list_fn: Callable, *, label_selector: str = "",
                 field_selector: str = "", wakeup: threading.Event | None = None, watch_timeout: int = 60,
                 resync_seconds: float = 300.0, keep: Callable[[dict], bool] | None = None):
        self.clients = clients
        self.name = name
        self.list_fn = list_fn
        self.selectors = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        self.wakeup = wakeup or threading.Event()
        self.watch_timeout = watch_timeout
        self.resync_seconds = resync_seconds
        self.keep = keep
        self._items: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()
        self.resource_version: str | None = None
        self.synced = False
        self.last_list = float("-inf")
        self.lists = 0  # how many full lists so far (first list, 410s and resyncs)
        self.gone = 0  # how many 410s were answered by a re-list

    @staticmethod
    def key(obj: dict) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") or "", meta.get("name") or ""

    def items(self) -> list[dict]:
        with self._lock:
            return list(self._items.values())

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return self._items.get((namespace, name))

    def relist(self) -> None:
        data = self.clients.call(self.list_fn, **self.selectors)
        items = {self.key(obj): obj for obj in data.get("items") or [] if self.keep is None or self.keep(obj)}
        with self._lock:
            self._items = items
            self.resource_version = (data.get("metadata") or {}).get("resourceVersion")
            self.synced = True
        self.last_list = time.monotonic()
        self.lists += 1
        self.wakeup.set()

    def apply(self, event: dict) -> None:
        obj = event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            if event.get("type") in ("ADDED", "MODIFIED"):
                if self.keep is None or self.keep(obj):
                    self._items[self.key(obj)] = obj
            elif event.get("type") == "DELETED":
                self._items.pop(self.key(obj), None)
            if version:
                self.resource_version = version
        self.wakeup.set()

    def watch_once(self, stop: threading.Event | None = None) -> None:
        """One watch request from the last resourceVersion until the server ends it (or stop)."""
        for event in self.clients.stream(self.list_fn, timeout_seconds=self.watch_timeout,
                                         resource_version=self.resource_version, allow_watch_bookmarks=True,
                                         **self.selectors):
            self.apply(event)
            if stop is not None and stop.is_set():
                return

    def step(self, stop: threading.Event | None = None) -> None:
        """List when needed (never listed, resync due), else watch; a 410 means list again."""
        if not self.synced or time.monotonic() - self.last_list >= self.resync_seconds:
            self.relist()
            return
        try:
            self.watch_once(stop)
        except Gone:
            self.gone += 1
            logger.info("informer %s: resourceVersion %s expired (410); listing again", self.name,
                        self.resource_version)
            self.relist()

    def run(self, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                self.step(stop)
                failures = 0
            except (TransientError, ApiError, urllib3.exceptions.HTTPError, ValueError) as exc:
                failures += 1
                delay = min(0.2 * 2 ** failures, 10.0)
                logger.warning("informer %s: %s; retrying in %.1fs", self.name, exc, delay)
                stop.wait(delay)
            except Exception:
                logger.exception("informer %s: unexpected error", self.name)
                stop.wait(1.0)
