from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "apps.clusters"
    label = "clusters"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .crypto import rotate_after_migrate

        post_migrate.connect(rotate_after_migrate, dispatch_uid="cairn-rotate-legacy-credentials")
