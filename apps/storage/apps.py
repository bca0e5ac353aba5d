from django.apps import AppConfig


class StorageConfig(AppConfig):
    """Project volumes, datasets (versioned manifests, node caches) and model artifacts."""

    name = "apps.storage"
    label = "storage"

    def ready(self) -> None:
        from apps.clusters.crypto import encrypted_fields  # the seam clusters offers

        encrypted_fields.append(("storage.Dataset", "credentials_encrypted"))
