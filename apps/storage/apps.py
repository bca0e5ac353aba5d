from django.apps import AppConfig


class StorageConfig(AppConfig):
    """Project volumes, datasets (versioned manifests, node caches) and model artifacts."""

    name = "apps.storage"
    label = "storage"
