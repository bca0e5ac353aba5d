"""Where a workload may mount volumes, datasets and models: pure checks on the text of the spec.

Mount paths are absolute, normalised, free of '..', and lie strictly inside one of MOUNT_ROOTS,
so that no mount can cover the system directories, Cairn's Python, the notebook home or the
model path. Two mounts of one workload may not be equal or nested (`check_clashes`).
"""
from __future__ import annotations

import posixpath
import re

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MOUNT_ROOTS = ("/data", "/datasets", "/mnt", "/scratch", "/workspace")
MODEL_MOUNT = "/model"  # where a deployment sees the model it serves, read-only
MAX_MOUNTS = 16
ARTIFACTS_VOLUME = "artifacts"  # the project's artifact store: models are written only by Cairn


class MountError(ValueError):
    """A mount the spec may not have; the message is meant for the user."""


def default_mount(name: str) -> str:
    return f"/data/{name}"


def check_mount_path(value) -> str:
    if not isinstance(value, str) or not value:
        raise MountError("Give the mount path as an absolute path such as '/data/images'.")
    if "\x00" in value or len(value) > 1024:
        raise MountError("The mount path is not a usable path.")
    if not value.startswith("/"):
        raise MountError(f"'{value[:200]}' is not an absolute path.")
    if ".." in value.split("/"):
        raise MountError("A mount path may not contain '..'.")
    path = posixpath.normpath(value)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if not any(path.startswith(root + "/") for root in MOUNT_ROOTS):
        raise MountError(f"'{path[:200]}' is outside the directories mounts may use: mount inside one of "
                         f"{', '.join(MOUNT_ROOTS)} (for example '/data/<name>').")
    return path


def nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def check_clashes(paths: list[tuple[str, str]]) -> None:
    """paths: (what, mount path). Raises MountError at the first two that are equal or nested."""
    for i, (what, path) in enumerate(paths):
        for other, other_path in paths[:i]:
            if nested(path, other_path):
                raise MountError(f"Mount clash: {what} at '{path}' and {other} at '{other_path}' overlap; "
                                 "give each its own folder.")


def parse_model_ref(value) -> tuple[str, int | None]:
    """'name@3' -> ('name', 3); 'name' or 'name@latest' -> ('name', None)."""
    if not isinstance(value, str) or not value:
        raise MountError("Give the model as 'name@version', e.g. 'resnet@3'.")
    name, _, version = value.partition("@")
    if not NAME_RE.match(name):
        raise MountError(f"'{name[:100]}' is not a model name (lowercase letters, digits and '-').")
    if version in ("", "latest"):
        return name, None
    if not version.isdigit() or int(version) < 1 or len(version) > 9:
        raise MountError(f"'{version[:40]}' is not a version number; give 'name@3' or 'name@latest'.")
    return name, int(version)
