from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "apps.tracking"
    label = "tracking"

    def ready(self) -> None:
        from .topics import register_topics  # the live topics tracking owns (apps.core.live); needs models

        register_topics()
