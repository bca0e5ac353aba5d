from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "apps.telemetry"
    label = "telemetry"

    def ready(self) -> None:
        from .topics import register_topics  # the live topics telemetry owns (apps.core.live); needs models

        register_topics()
