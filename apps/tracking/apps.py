from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "apps.tracking"
    label = "tracking"

    def ready(self) -> None:
        # The seams the apps below offer (workloads and backends may not import tracking).
        from apps.backends.launch_env import attempt_env_providers
        from apps.workloads.services import attempt_ended_handlers

        from .services import run_env_for_attempt, runs_close_for_workload

        attempt_ended_handlers.append(runs_close_for_workload)
        attempt_env_providers.append(run_env_for_attempt)

        from .topics import register_topics  # the live topics tracking owns (apps.core.live); needs models

        register_topics()
