from django.apps import AppConfig


class BackendsConfig(AppConfig):
    name = "apps.backends"
    label = "backends"

    def ready(self) -> None:
        from .topics import register_topics  # the live topics backends owns (apps.core.live); needs models

        register_topics()
