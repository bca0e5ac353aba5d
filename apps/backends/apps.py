from django.apps import AppConfig


def _kubernetes_credentials_probe(connection: dict, *, timeout: float) -> dict:
    # Loaded on first use, like the Kubernetes backend itself: the `kubernetes` client is optional.
    from .kubernetes.client import check_connectivity

    return check_connectivity(connection, timeout=timeout)


class BackendsConfig(AppConfig):
    name = "apps.backends"
    label = "backends"

    def ready(self) -> None:
        # The seams the apps below offer (clusters and workloads may not import backends).
        from apps.clusters.choices import Backend
        from apps.clusters.services import credential_probes
        from apps.workloads.logs import log_access

        from .selectors import workload_log_reader, workload_log_text

        credential_probes[Backend.KUBERNETES] = _kubernetes_credentials_probe
        log_access["read"] = workload_log_text
        log_access["reader"] = workload_log_reader

        from .topics import register_topics  # the live topics backends owns (apps.core.live); needs models

        register_topics()
