"""Where the local backend keeps volumes, the artifact store and the node cache (on this machine)."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings


def volumes_root() -> Path:
    return Path(settings.CAIRN_DATA_DIR) / "volumes"


def volume_path(project_id: int, name: str) -> Path:
    return volumes_root() / str(project_id) / name


def model_version_relpath(model_name: str, number: int) -> str:
    """Inside the project's artifacts volume."""
    return f"models/{model_name}/{number}"


def cache_root() -> Path:
    configured = settings.CAIRN.get("DATASET_CACHE_DIR")
    return Path(configured) if configured else Path(settings.CAIRN_DATA_DIR) / "cache" / "datasets"
