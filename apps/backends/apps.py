from django.apps import AppConfig


class BackendsConfig(AppConfig):
    name = "apps.backends"
    label = "backends"

    def ready(self) -> None:
        # The seams the apps below offer (clusters and workloads may not import backends).
        from apps.clusters.backends import register_backend
        from apps.clusters.services import credential_probes
        from apps.notebooks.access import upstream_resolvers
        from apps.workloads.logs import log_access

        from .base import backend_packages
        from .launch_env import attempt_env_providers, checkpoint_env_for_attempt
        from .selectors import workload_log_reader, workload_log_text

        # Every backend package of settings.CAIRN_BACKENDS, through its declared spec.
        for name, package in backend_packages().items():
            register_backend(package.SPEC)
            if package.SPEC.credential_probe is not None:
                credential_probes[name] = package.SPEC.credential_probe
            if package.SPEC.notebook_upstream is not None:
                upstream_resolvers[name] = package.SPEC.notebook_upstream
        log_access["read"] = workload_log_text
        log_access["reader"] = workload_log_reader
        attempt_env_providers.append(checkpoint_env_for_attempt)  # CAIRN_CHECKPOINT_DIR (docs/training.md)

        from .topics import register_topics  # the live topics backends owns (apps.core.live); needs models

        register_topics()
