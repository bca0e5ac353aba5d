"""How Cairn's notebook proxy (apps/notebooks/proxy.py) and idle culler reach a notebook on
Kubernetes: its Service, with no Ingress per notebook and no token leaving Cairn.

- "dns" (Cairn runs inside the cluster): http://cairn-<id>.<namespace>.svc:8888, straight to the
  Service; a NetworkPolicy must let Cairn's pods reach port 8888 of the notebooks' pods.
- "apiserver" (Cairn runs outside): the API server's service proxy,
  <server>/api/v1/namespaces/<ns>/services/http:cairn-<id>:8888/proxy/..., signed in with the
  cluster's own credentials (Cairn's RBAC needs `services/proxy` get/create); the API server then
  forwards to the Service (websockets included).
The Jupyter token travels in X-Cairn-Upstream-Token (the API server consumes Authorization).
Registered from apps/backends/apps.py into apps.notebooks.access.upstream_resolvers.
"""
from __future__ import annotations

import ssl

from apps.clusters.selectors import cluster_connection
from apps.notebooks.access import Upstream
from apps.notebooks.commands import UPSTREAM_TOKEN_HEADER

from .client import clients_for, kube_settings


def notebook_route(cluster) -> str:
    route = kube_settings().get("NOTEBOOK_ROUTE") or "auto"
    if route in ("dns", "apiserver"):
        return route
    try:
        in_cluster = bool(cluster_connection(cluster=cluster).get("in_cluster"))
    except Exception:  # noqa: BLE001 - no readable credentials: the API server route fails later, clearly
        in_cluster = False
    return "dns" if in_cluster else "apiserver"


def _tls(configuration) -> ssl.SSLContext | bool:
    if not configuration.verify_ssl:
        return False
    if not (configuration.ssl_ca_cert or configuration.cert_file):
        return True
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


def notebook_upstream(workload, token: str) -> Upstream | None:
    runtime = workload.runtime if isinstance(workload.runtime, dict) else {}
    namespace, service, port = runtime.get("namespace"), runtime.get("service"), runtime.get("port")
    if not (isinstance(namespace, str) and isinstance(service, str) and isinstance(port, int)):
        return None
    headers: tuple = ((UPSTREAM_TOKEN_HEADER.lower().encode(), token.encode()),) if token else ()
    cluster = workload.pool.cluster
    if notebook_route(cluster) == "dns":
        return Upstream(base=f"http://{service}.{namespace}.svc:{port}", headers=headers)
    configuration = clients_for(cluster).api.configuration
    # The kubeconfig loader keeps a bearer token under "BearerToken" (with its "Bearer " prefix).
    authorization = configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
    if authorization:
        headers += ((b"authorization", authorization.encode()),)
    base = f"{configuration.host.rstrip('/')}/api/v1/namespaces/{namespace}/services/http:{service}:{port}/proxy"
    return Upstream(base=base, headers=headers, verify=_tls(configuration))
