"""One active reconciler per cluster: leader election on a coordination.k8s.io Lease.

Every reconciler process runs a LeaderElector per cluster (its informers run too: a standby's
caches are warm when it takes over). The elector holds the Lease `LEASE_NAME` in
`LEASE_NAMESPACE` (default: Cairn's namespace, cairn-system) of that cluster, as client-go's
leaderelection does:

- a candidate takes the Lease when it does not exist (create), has no holder (released), or its
  holder has not renewed it for `LEASE_SECONDS` *as observed by this candidate* (its own clock
  since the Lease last changed: no clock is compared across machines);
- the holder renews it every `RETRY_SECONDS`; every write is a replace with the Lease's
  resourceVersion, so of two candidates racing exactly one wins (409 for the other);
- the holder acts only while its last successful renewal started less than
  `RENEW_DEADLINE_SECONDS` ago (< LEASE_SECONDS: it stops acting before anyone may take over);
- a holder that stops (SIGTERM, a redeploy) releases the Lease (holder cleared), so a standby
  takes over at its next try instead of after the lease time.

The kubernetes package's own `kubernetes.leaderelection` is not used: its LeaseLock talks through
the process-wide default configuration (Cairn has one per cluster, from the registered
kubeconfig), its loop blocks without a way to stop, and it never releases the Lease.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime

from .client import ApiError, Clients, TransientError, kube_settings

logger = logging.getLogger(__name__)


def default_identity() -> str:
    """This process: its host (the pod's name in a cluster), pid and a random part, as client-go."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def _micro_time(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, clients: Clients, *, identity: str | None = None, name: str | None = None,
                 namespace: str | None = None, lease_seconds: float | None = None,
                 renew_deadline_seconds: float | None = None, retry_seconds: float | None = None,
                 wakeup: threading.Event | None = None, cluster_name: str = ""):
        opts = kube_settings()
        self.clients = clients
        self.identity = identity or default_identity()
        self.name = name or opts["LEASE_NAME"]
        self.namespace = namespace or opts["LEASE_NAMESPACE"] or opts["CAIRN_NAMESPACE"]
        self.lease_seconds = float(lease_seconds or opts["LEASE_SECONDS"])
        self.renew_deadline = float(renew_deadline_seconds or opts["RENEW_DEADLINE_SECONDS"])
        self.retry_seconds = float(retry_seconds or opts["LEASE_RETRY_SECONDS"])
        if not self.renew_deadline < self.lease_seconds:
            raise ValueError("RENEW_DEADLINE_SECONDS must be less than LEASE_SECONDS")
        self.wakeup = wakeup
        self.cluster_name = cluster_name
        self._renewed_at = float("-inf")  # monotonic start of the last successful acquire / renew
        self._observed: tuple | None = None  # (holder, renewTime, resourceVersion) last seen
        self._observed_at = float("-inf")  # monotonic time it was first seen so
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._complained = ""
        # each request well within the renew deadline: a hung one must not outlast the leadership
        self.timeout = (min(5.0, self.renew_deadline / 2), self.renew_deadline / 2)
        self.holder: str | None = None  # who holds the Lease, as last read
        self.transitions = 0  # leadership changes this elector made (acquisitions)
        self.attempts = 0  # tries so far

    # -- state ------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return time.monotonic() - self._renewed_at < self.renew_deadline

    def _api(self):
        return self.clients.coordination

    def _call(self, fn, *args):
        return self.clients.call(fn, *args, retries=0, _request_timeout=self.timeout)

    # -- one try ----------------------------------------------------------------------------------

    def _spec(self, *, acquired: str, transitions: int) -> dict:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(round(self.lease_seconds)),
                "acquireTime": acquired, "renewTime": _micro_time(), "leaseTransitions": transitions}

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        started = time.monotonic()
        self.attempts += 1
        try:
            lease = self._call(self._api().read_namespaced_lease, self.name, self.namespace)
        except ApiError as exc:
            if exc.status != 404:
                return self._failed(f"reading Lease {self.namespace}/{self.name}: {exc}")
            try:
                self._call(self._api().create_namespaced_lease, self.namespace, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "labels": {"app.kubernetes.io/managed-by": "cairn"}},
                    "spec": self._spec(acquired=_micro_time(), transitions=0)})
            except ApiError as exc:
                hint = (" (create the namespace, or set CAIRN_K8S_LEASE_NAMESPACE: no reconciler acts on this "
                        "cluster without the Lease)" if exc.status == 404 else "")
                return self._failed("" if exc.status == 409 else
                                    f"creating Lease {self.namespace}/{self.name}: {exc}{hint}")
            return self._won(started, acquired=True)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        self.holder = holder or None
        record = (holder, spec.get("renewTime"), (lease.get("metadata") or {}).get("resourceVersion"))
        if record != self._observed:
            self._observed, self._observed_at = record, started
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        mine = holder == self.identity
        if holder and not mine and started - self._observed_at < duration:
            return self._lost()  # held, and renewed within its duration as far as we have seen
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        body = {**lease, "spec": {**spec, **self._spec(
            acquired=spec.get("acquireTime") if mine and spec.get("acquireTime") else _micro_time(),
            transitions=transitions)}}
        try:
            self._call(self._api().replace_namespaced_lease, self.name, self.namespace, body)
        except ApiError as exc:
            return self._failed("" if exc.status == 409 else f"updating Lease {self.namespace}/{self.name}: {exc}")
        return self._won(started, acquired=not mine)

    def _won(self, started: float, *, acquired: bool) -> bool:
        was = self.is_leader
        self._renewed_at = started
        self.holder = self.identity
        self._complained = ""
        if acquired or not was:
            self.transitions += 1
            logger.info("kubernetes reconciler: %s leads cluster %s (Lease %s/%s)", self.identity, self.cluster_name,
                        self.namespace, self.name)
            if self.wakeup is not None:
                self.wakeup.set()
        return True

    def _lost(self) -> bool:
        if self.is_leader:
            logger.warning("kubernetes reconciler: %s lost the Lease of cluster %s to %s", self.identity,
                           self.cluster_name, self.holder)
        self._renewed_at = float("-inf")
        return False

    def _failed(self, why: str) -> bool:
        if why and why != self._complained:  # once per new reason, not every retry
            logger.warning("kubernetes reconciler: leader election for cluster %s: %s", self.cluster_name, why)
            self._complained = why
        return self.is_leader  # a failed renewal: still leading until the renew deadline

    def release(self) -> None:
        """Give the Lease up (only if held): holder cleared, so a standby takes it at once."""
        if not self.is_leader:
            return
        self._renewed_at = float("-inf")
        try:
            lease = self._call(self._api().read_namespaced_lease, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1,
                             "renewTime": _micro_time()}
            self._call(self._api().replace_namespaced_lease, self.name, self.namespace, lease)
            logger.info("kubernetes reconciler: %s released the Lease of cluster %s", self.identity,
                        self.cluster_name)
        except (ApiError, TransientError) as exc:
            logger.info("kubernetes reconciler: releasing the Lease of cluster %s: %s", self.cluster_name, exc)

    # -- the thread -------------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_acquire_or_renew()
            except TransientError as exc:
                self._failed(str(exc))
            except Exception:  # noqa: BLE001 - the elector must keep trying
                logger.exception("kubernetes reconciler: leader election for cluster %s", self.cluster_name)
            self._stop.wait(self.retry_seconds)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, daemon=True, name=f"k8s-{self.cluster_name}-lease")
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 2.0) -> None:
        """Stop trying; with `release`, give the Lease up (a clean shutdown). Without it, as if
        the process died: the others wait out the lease time."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if release:
            self.release()
        self._renewed_at = float("-inf")
