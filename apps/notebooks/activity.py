"""Reading a running notebook's activity from its IDE, through the same upstream and credential
as the proxy (access.upstream_of): Jupyter's REST API (`/api/kernels`, `/api/terminals`,
`/api/status`, each with `no_track_activity` so that reading does not count as activity), or
code-server's `/healthz` (its last heartbeat)."""
from __future__ import annotations

import logging
from datetime import UTC, datetime

import httpx

from apps.workloads.models import Workload

from .access import upstream_of
from .commands import ide_of, proxy_prefix
from .culling import Observation

logger = logging.getLogger(__name__)

TIMEOUT = 5.0


def _time(value) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def observe(workload: Workload, *, gpu_utilisation: float | None) -> Observation:
    upstream = upstream_of(workload)
    if upstream is None:
        return Observation(reached=False, gpu_utilisation=gpu_utilisation)
    root = upstream.base + ("/" if upstream.strip_prefix else proxy_prefix(workload))
    try:
        with httpx.Client(verify=upstream.verify, timeout=TIMEOUT, headers=dict(upstream.headers)) as client:
            if ide_of(workload) == "vscode":
                health = client.get(root + "healthz")
                health.raise_for_status()
                beat = health.json().get("lastHeartbeat")
                last = datetime.fromtimestamp(beat / 1000, tz=UTC) if isinstance(beat, int | float) and beat else None
                return Observation(reached=True, last_activity=last, gpu_utilisation=gpu_utilisation)
            query = {"no_track_activity": "1"}
            kernels = client.get(root + "api/kernels", params=query)
            terminals = client.get(root + "api/terminals", params=query)
            status = client.get(root + "api/status", params=query)
            for answer in (kernels, terminals, status):
                answer.raise_for_status()
            kernel_rows, terminal_rows = kernels.json(), terminals.json()
    except (httpx.HTTPError, ValueError) as exc:
        logger.info("culler: notebook %s did not answer: %r", workload.pk, exc)
        return Observation(reached=False, gpu_utilisation=gpu_utilisation)
    times = [_time(row.get("last_activity")) for row in [*kernel_rows, *terminal_rows] if isinstance(row, dict)]
    times = [t for t in times if t is not None]
    busy = sum(1 for row in kernel_rows if isinstance(row, dict) and row.get("execution_state") == "busy")
    connections = status.json().get("connections", 0)
    return Observation(reached=True, busy_kernels=busy, kernels=len(kernel_rows),
                       connections=connections if isinstance(connections, int) else 0,
                       last_activity=max(times) if times else None, gpu_utilisation=gpu_utilisation)
