"""Cairn SDK: the API client (`cairn.Client`), the `cairn` command line (`cairn.cli`) and,
later, the in-job logger (`cairn.init()` / `cairn.log()`).

Importing `cairn` stays cheap and side-effect free: jobs import it at start-up, so the client
and its dependencies load only when first used.

Layout:
  client.py   Client(url, token) and the CairnError hierarchy
  config.py   the CLI's config file (~/.config/cairn/config.json) and CAIRN_* env overrides
  jobspec.py  reading and checking job.yaml files
  cli.py      the `cairn` command (argparse) and its table output (rich)
  checkpoint.py  cairn.checkpoint.save() / latest(): atomic checkpoints Cairn knows about
  tracking/   the in-job logger: `cairn.init()`, `cairn.log()`, `cairn.log_params()`,
              `cairn.finish()` (re-exported here, imported on first use); it reads the env
              vars the backends inject (CAIRN_API_URL, CAIRN_RUN_ID, CAIRN_RUN_TOKEN, ...)
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
    "finish",
    "init",
    "log",
    "log_params",
    "progress",
    "register_model",
]
_TRACKING = frozenset({"init", "log", "log_params", "finish", "progress"})

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
    if name == "checkpoint":  # cairn.checkpoint.save() / latest(): imported on first use
        import importlib

        return importlib.import_module("cairn.checkpoint")
    if name == "register_model":
        from cairn.models import register_model

        return register_model
    if name in _TRACKING:
        from cairn import tracking

        return getattr(tracking, name)
    if name in __all__ and name != "__version__":
        from cairn import client

        return getattr(client, name)
    raise AttributeError(f"module 'cairn' has no attribute {name!r}")
