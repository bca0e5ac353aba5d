from django.apps import AppConfig


def _kubernetes_credentials_probe(connection: dict, *, timeout: float) -> dict:
    # Loaded on first use, like the Kubernetes backend itself: the `kubernetes` client is optional.
    from .kubernetes.client import check_connectivity

    return check_connectivity(connection, timeout=timeout)


class BackendsConfig(AppConfig):
    name = "apps.backends"
    label = "backends"

    def ready(self) -> None:
        from apps.clusters.choices import Backend
        from apps.clusters.services import credential_probes  # the seam clusters offers

        credential_probes[Backend.KUBERNETES] = _kubernetes_credentials_probe
