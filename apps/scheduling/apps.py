from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "apps.scheduling"
    label = "scheduling"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the settings checks)
