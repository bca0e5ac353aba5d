"""Readiness: a deployment's replica gets traffic only once an HTTP GET on its readiness path
(spec `readiness_path`, default `/`) answers with a status below 400.

`replica_ready` is the kind's probe (KindSpec.probe_ready): the local reconciler calls it for
every live replica at each pass and records the answer as `ready` in the replica's record; the
gateway forwards only to replicas recorded ready (selectors.deployment_targets). On Kubernetes the
same path is the pod's readinessProbe, and the Service sends traffic to ready pods only.
"""
from __future__ import annotations

import logging
import os
import ssl
from functools import cache

import httpx

from apps.core.proxy import UnsafeSocket, open_checked_socket, socket_alias

from .conf import setting

logger = logging.getLogger(__name__)

DEFAULT_PATH = "/"


def readiness_path(spec: dict | None) -> str:
    path = (spec or {}).get("readiness_path") or DEFAULT_PATH
    return path if str(path).startswith("/") else f"/{path}"


@cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every probe: httpx builds a new one per client otherwise (loading the CA
    bundle, ~20 ms of CPU), and the reconciler probes every replica at each pass. Probes speak plain
    HTTP; the context is never used, only built."""
    return ssl.create_default_context()


def probe(*, socket: str | None = None, url: str | None = None, path: str = DEFAULT_PATH,
          timeout: float | None = None) -> bool:
    """One GET on `path` of a replica reached by its unix socket or its base URL."""
    timeout = float(setting("SERVE_PROBE_TIMEOUT_SECONDS")) if timeout is None else timeout
    fd = None
    try:
        if socket:
            # Never through a link: only the socket Cairn made (apps.core.proxy.open_checked_socket).
            fd = open_checked_socket(socket)
            client = httpx.Client(transport=httpx.HTTPTransport(uds=socket_alias(fd), verify=_tls()), timeout=timeout)
            target = f"http://replica{path}"
        elif url:
            client = httpx.Client(timeout=timeout, verify=_tls())
            target = f"{url.rstrip('/')}{path}"
        else:
            return False
        with client:
            answer = client.get(target, headers={"User-Agent": "cairn-readiness-probe"})
            return answer.status_code < 400
    except UnsafeSocket as exc:
        logger.warning("readiness: %s", exc)
        return False
    except (httpx.HTTPError, OSError):
        return False
    finally:
        if fd is not None:
            os.close(fd)


def replica_ready(workload, record: dict) -> bool:
    """KindSpec.probe_ready for deployments: probe one local replica (its bridge socket or port)."""
    path = readiness_path(workload.spec)
    if record.get("socket"):
        return probe(socket=str(record["socket"]), path=path)
    if record.get("port"):
        return probe(url=f"http://127.0.0.1:{int(record['port'])}", path=path)
    return False
