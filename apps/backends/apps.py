from django.apps import AppConfig


def _kubernetes_credentials_probe(connection: dict, *, timeout: float) -> dict:
    # Loaded on first use, like the Kubernetes backend itself: the `kubernetes` client is optional.
    from .kubernetes.client import check_connectivity

    return check_connectivity(connection, timeout=timeout)


def _kubernetes_notebook_upstream(workload, token: str):
    # Loaded on first use, like the Kubernetes backend itself.
    from .kubernetes.proxy import notebook_upstream

    return notebook_upstream(workload, token)


class BackendsConfig(AppConfig):
    name = "apps.backends"
    label = "backends"

    def ready(self) -> None:
        # The seams the apps below offer (clusters and workloads may not import backends).
        from apps.clusters.choices import Backend
        from apps.clusters.services import credential_probes
        from apps.notebooks.access import upstream_resolvers
        from apps.workloads.logs import log_access

        from .launch_env import attempt_env_providers, checkpoint_env_for_attempt
        from .selectors import workload_log_reader, workload_log_text

        credential_probes[Backend.KUBERNETES] = _kubernetes_credentials_probe
        # The notebook proxy and culler reach a Kubernetes notebook through its Service.
        upstream_resolvers[Backend.KUBERNETES] = _kubernetes_notebook_upstream
        log_access["read"] = workload_log_text
        log_access["reader"] = workload_log_reader
        attempt_env_providers.append(checkpoint_env_for_attempt)  # CAIRN_CHECKPOINT_DIR (docs/training.md)

        from .topics import register_topics  # the live topics backends owns (apps.core.live); needs models

        register_topics()
