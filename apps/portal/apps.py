from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The composition root: the API root, the websocket hub and routes, `run_embedded` and
    `seed_demo`. The one app allowed to import every other; none imports it."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.portal"
