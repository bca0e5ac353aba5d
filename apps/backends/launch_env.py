"""What the apps above the backends give each attempt's replicas, as environment variables.

A provider registered here at AppConfig.ready() (tracking registers `run_env_for_attempt`: the
attempt's run id and a fresh write-only run token for `cairn.init()`; backends itself registers
`checkpoint_env_for_attempt`: CAIRN_CHECKPOINT_DIR) is called once per launch,
in a synchronous context, and returns {NAME: value}. The backends sit below tracking and may not
import it; they call `attempt_env` instead.
"""
from collections.abc import Callable

from apps.workloads.kinds import kind_spec

from .base import backend_for

attempt_env_providers: list[Callable[..., dict[str, str]]] = []


def attempt_env(*, workload, attempt: int) -> dict[str, str]:
    """The variables every provider gives this attempt of `workload`, merged in registration order."""
    env: dict[str, str] = {}
    for provider in attempt_env_providers:
        env.update(provider(workload=workload, attempt=attempt))
    return env


def checkpoint_env_for_attempt(*, workload, attempt: int) -> dict[str, str]:
    """CAIRN_CHECKPOINT_DIR for a workload that runs to completion (training): the folder its
    backend keeps across attempts (`Backend.checkpoint_env`), read by `cairn.checkpoint`."""
    if not kind_spec(workload.kind).runs_to_completion:
        return {}
    return backend_for(workload).checkpoint_env(workload)
