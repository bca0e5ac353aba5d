"""Cairn SDK: the API client (`cairn.Client`), the `cairn` command line (`cairn.cli`) and,
later, the in-job logger (`cairn.init()` / `cairn.log()`).

Importing `cairn` stays cheap and side-effect free: jobs import it at start-up, so the client
and its dependencies load only when first used.

Layout:
  client.py   Client(url, token) and the CairnError hierarchy
  config.py   the CLI's config file (~/.config/cairn/config.json) and CAIRN_* env overrides
  jobspec.py  reading and checking job.yaml files
  cli.py      the `cairn` command (argparse) and its table output (rich)
  tracking/   reserved for the in-job logger, `cairn.init()` / `cairn.log()`, which will read
              the env vars the backends inject (CAIRN_URL, CAIRN_RUN_TOKEN, ...) and be
              re-exported here
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "CairnConnectionError",
    "CairnError",
    "Client",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Unauthorized",
    "ValidationFailed",
    "__version__",
]

if TYPE_CHECKING:  # pragma: no cover
    from cairn.client import (
        CairnConnectionError,
        CairnError,
        Client,
        Conflict,
        Forbidden,
        NotFound,
        Unauthorized,
        ValidationFailed,
    )


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "__version__":
        from cairn import client

        return getattr(client, name)
    raise AttributeError(f"module 'cairn' has no attribute {name!r}")
