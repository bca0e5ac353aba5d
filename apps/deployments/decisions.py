"""The gateway's short memory of granted calls (see SERVE_AUTH_CACHE_SECONDS in conf.py)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from .conf import setting

# Granted decisions (who may call, and the deployment's ready replicas) are kept this long per
# process, so a burst of requests costs one database lookup (SERVE_AUTH_CACHE_SECONDS; 0: off).
# Refusals are never kept. A revoked key or token, a replica no longer ready, a new canary weight
# reach this process within that time; keys revoked in this process are forgotten at once.
_decisions: dict[tuple, tuple[float, object]] = {}
_DECISIONS_LIMIT = 10_000


def cached(key: tuple):
    found = _decisions.get(key)
    if found is None:
        return None
    if time.monotonic() >= found[0]:
        _decisions.pop(key, None)
        return None
    return found[1]


def remember(key: tuple, decision) -> None:
    ttl = float(setting("SERVE_AUTH_CACHE_SECONDS"))
    if ttl <= 0 or decision.status != 200 or not decision.targets:
        return
    if len(_decisions) >= _DECISIONS_LIMIT:
        _decisions.clear()
    _decisions[key] = (time.monotonic() + ttl, decision)


def forget() -> None:
    """Drop every kept decision of this process (a key was revoked here)."""
    _decisions.clear()


_deciding: dict[tuple, asyncio.Future] = {}  # decisions being made, per event loop and key


async def decide_once(key: tuple, make: Callable[[], Awaitable]):
    """The decision for `key`: the kept one, else the one another request of this event loop is
    making (waited for: when the kept decision expires under load, every request in flight would
    otherwise ask the database the same question at once), else made now by `make()`."""
    found = cached(key)
    if found is not None:
        return found
    loop = asyncio.get_running_loop()
    slot = (id(loop), key)
    pending = _deciding.get(slot)
    if pending is not None:
        shared = await asyncio.shield(pending)
        if shared is not None:
            return shared  # (None: that attempt failed; this request makes its own)
    future = _deciding[slot] = loop.create_future()
    decision = None
    try:
        decision = await make()
        remember(key, decision)
        return decision
    finally:
        future.set_result(decision)
        if _deciding.get(slot) is future:
            del _deciding[slot]
