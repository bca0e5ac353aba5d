from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "apps.tracking"
    label = "tracking"

    def ready(self) -> None:
        from apps.workloads.services import attempt_ended_handlers  # the seam workloads offers

        from .services import runs_close_for_workload

        attempt_ended_handlers.append(runs_close_for_workload)
