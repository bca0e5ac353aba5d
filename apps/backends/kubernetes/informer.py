"""List + watch caches (the informer pattern, small): one per resource kind per cluster.

An Informer lists its objects page by page (`limit` / `continue`, PAGE_SIZE objects a request),
slims each to what Cairn reads (slim.py) before caching it, and remembers the list's
resourceVersion; then it watches from that version, applying ADDED / MODIFIED / DELETED to its
cache and remembering the version of every event (bookmarks included). A watch that ends
(server timeout) resumes from the last version; a 410 Gone (the version was compacted away)
means list again; every `relist_seconds` it lists again anyway, so anything a watch missed is
corrected.

Lists after the first ask for `resourceVersion=<the last one seen>&resourceVersionMatch=
NotOlderThan`: the API server's watch cache answers them, never etcd, and never with older data
than the informer already had. `resourceVersion=0` is not used: the watch cache ignores `limit`
for it and answers the whole list in one body (kube-apiserver 1.36, measured), which is what the
pages are for. The first list leaves the version unset (a consistent read, which current API
servers also serve from the watch cache).

Each change wakes the reconciler (`wakeup`) and is handed to `on_change(informer, key, old,
new)` (old / new None for an add / delete): the reconciler queues the workloads and nodes it
touched (reconciler.py, the work queue). An update whose slimmed object equals the cached one
but for its resourceVersion changes nothing Cairn reads and is not handed on (a Node's status
heartbeat, every 10 s per node). `indexers` keep lookups by a derived value (pods by workload
and by node) so that a pass never walks every object to find a workload's.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import urllib3

from .client import ApiError, Clients, Gone, TransientError
from .slim import same_but_version

logger = logging.getLogger(__name__)

PAGE_SIZE = 500  # client-go's pager's default

Key = tuple[str, str]


class Informer:
    def __init__(self, clients: Clients, name: str, list_fn: Callable, *, label_selector: str = "",
                 field_selector: str = "", wakeup: threading.Event | None = None, watch_timeout: int = 60,
                 resync_seconds: float = 300.0, keep: Callable[[dict], bool] | None = None,
                 slim: Callable[[dict], dict] | None = None, page_size: int | None = None,
                 indexers: dict[str, Callable[[dict], Iterable[str]]] | None = None,
                 on_change: Callable[[Informer, Key, dict | None, dict | None], None] | None = None):
        self.clients = clients
        self.name = name
        self.list_fn = list_fn
        self.selectors = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        self.wakeup = wakeup or threading.Event()
        self.watch_timeout = watch_timeout
        self.relist_seconds = resync_seconds  # (named resync before lists were told apart from full passes)
        self.keep = keep
        self.slim = slim
        self.page_size = page_size or PAGE_SIZE
        self.indexers = dict(indexers or {})
        self.on_change = on_change
        self._items: dict[Key, dict] = {}
        self._indexes: dict[str, dict[str, set[Key]]] = {name: {} for name in self.indexers}
        self._lock = threading.Lock()
        self.resource_version: str | None = None
        self.synced = False
        self.last_list = float("-inf")
        self.lists = 0  # how many full lists so far (first list, 410s and relists)
        self.pages = 0  # list requests (pages) so far
        self.gone = 0  # how many 410s were answered by a re-list
        self.events = 0  # watch events applied (bookmarks left out)
        self.unchanged = 0  # of them, updates that changed nothing Cairn reads

    @staticmethod
    def key(obj: dict) -> Key:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") or "", meta.get("name") or ""

    def items(self) -> list[dict]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return self._items.get((namespace, name))

    def by_index(self, index: str, value: str) -> list[dict]:
        with self._lock:
            return [self._items[k] for k in self._indexes[index].get(value, ()) if k in self._items]

    def index_values(self, index: str) -> list[str]:
        with self._lock:
            return list(self._indexes[index])

    # -- ingest -------------------------------------------------------------------------------------

    def _ingest(self, obj: dict) -> dict | None:
        """The object as cached (slimmed), or None when it is not kept."""
        if self.keep is not None and not self.keep(obj):
            return None
        return self.slim(obj) if self.slim is not None else obj

    def _index_add(self, key: Key, obj: dict) -> None:
        for name, fn in self.indexers.items():
            for value in fn(obj) or ():
                self._indexes[name].setdefault(value, set()).add(key)

    def _index_remove(self, key: Key, obj: dict) -> None:
        for name, fn in self.indexers.items():
            for value in fn(obj) or ():
                keys = self._indexes[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indexes[name][value]

    def _list_pages(self):
        """Yield each page's items; returns the list's resourceVersion. A 410 on a page (its
        continue token expired) starts over, from a consistent read."""
        version = self.resource_version
        while True:
            kwargs = dict(self.selectors, limit=self.page_size)
            if version:
                kwargs.update(resource_version=version, resource_version_match="NotOlderThan")
            token = None
            try:
                while True:
                    if token:
                        kwargs = dict(self.selectors, limit=self.page_size, _continue=token)
                    data = self.clients.call(self.list_fn, **kwargs)
                    self.pages += 1
                    meta = data.get("metadata") or {}
                    yield data.get("items") or []
                    token = meta.get("continue")
                    if not token:
                        return meta.get("resourceVersion")
            except Gone:
                if version is None and token is None:
                    raise
                logger.info("informer %s: list expired mid-way (410); listing again", self.name)
                version = None
                yield None  # the caller drops what it collected

    def relist(self) -> None:
        """List everything again (page by page) and replace the cache. An object whose
        resourceVersion did not change keeps its cached copy (the new one is dropped at once),
        so at most one page is held beside the old cache."""
        with self._lock:
            old = dict(self._items)
        items: dict[Key, dict] = {}
        pages = self._list_pages()
        while True:
            try:
                page = next(pages)
            except StopIteration as done:
                version = done.value
                break
            if page is None:
                items = {}
                continue
            for raw in page:
                key = self.key(raw)
                cached = old.get(key)
                if cached is not None and (cached.get("metadata") or {}).get("resourceVersion") == (
                        raw.get("metadata") or {}).get("resourceVersion"):
                    items[key] = cached
                    continue
                obj = self._ingest(raw)
                if obj is not None:
                    items[key] = obj
            page.clear()
        changed = []
        with self._lock:
            for key, obj in old.items():
                if items.get(key) is not obj:
                    self._index_remove(key, obj)
            for key, obj in items.items():
                if old.get(key) is not obj:
                    self._index_add(key, obj)
                    changed.append((key, old.get(key), obj))
            changed += [(key, obj, None) for key, obj in old.items() if key not in items]
            self._items = items
            self.resource_version = version
            self.synced = True
        self.last_list = time.monotonic()
        self.lists += 1
        if self.on_change is not None:
            for key, before, after in changed:
                self.on_change(self, key, before, after)
        self.wakeup.set()

    def apply(self, event: dict) -> None:
        obj = event.get("object") or {}
        kind = event.get("type")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        change = None
        with self._lock:
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.events += 1
                key = self.key(obj)
                old = self._items.get(key)
                new = self._ingest(obj) if kind != "DELETED" else None
                if new is not None and same_but_version(old, new):
                    self._items[key] = new  # the newer version, nothing else new
                    self.unchanged += 1
                elif new is not None:
                    if old is not None:
                        self._index_remove(key, old)
                    self._items[key] = new
                    self._index_add(key, new)
                    change = (key, old, new)
                elif old is not None:
                    self._index_remove(key, old)
                    del self._items[key]
                    change = (key, old, None)
            if version:
                self.resource_version = version
        if change is not None:
            if self.on_change is not None:
                self.on_change(self, *change)
            self.wakeup.set()

    # -- the loop -----------------------------------------------------------------------------------

    def watch_once(self, stop: threading.Event | None = None) -> None:
        """One watch request from the last resourceVersion until the server ends it (or stop)."""
        for event in self.clients.stream(self.list_fn, timeout_seconds=self.watch_timeout,
                                         resource_version=self.resource_version, allow_watch_bookmarks=True,
                                         **self.selectors):
            self.apply(event)
            if stop is not None and stop.is_set():
                return

    def step(self, stop: threading.Event | None = None) -> None:
        """List when needed (never listed, relist due), else watch; a 410 means list again."""
        if not self.synced or time.monotonic() - self.last_list >= self.relist_seconds:
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
