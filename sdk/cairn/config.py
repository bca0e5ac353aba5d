"""The CLI's settings: a JSON file plus environment overrides.

File: $CAIRN_CONFIG, else $XDG_CONFIG_HOME/cairn/config.json, else
~/.config/cairn/config.json. It holds an API token, so it is written with mode 0600 (and
its directory, when we create it, 0700), atomically.

    {"url": "http://127.0.0.1:8000", "token": "cairn_...", "username": "alice",
     "project": "vision"}

Environment variables win over the file: CAIRN_URL, CAIRN_TOKEN, CAIRN_PROJECT.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
ENV_OVERRIDES = {"url": "CAIRN_URL", "token": "CAIRN_TOKEN", "project": "CAIRN_PROJECT"}
FILE_KEYS = ("url", "token", "username", "project")


class ConfigError(Exception):
    """The config file cannot be read or written."""


@dataclass
class Settings:
    """Effective settings. `from_env` names the keys taken from environment variables."""

    path: Path
    url: str = DEFAULT_URL
    token: str | None = None
    username: str | None = None
    project: str | None = None
    from_env: set[str] = field(default_factory=set)


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    explicit = environ.get("CAIRN_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "cairn" / "config.json"


def read_file(path: Path | None = None) -> dict[str, Any]:
    """The file's contents; {} when it does not exist."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix or delete it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object; fix or delete it")
    return data


def write_file(data: Mapping[str, Any], path: Path | None = None) -> Path:
    """Replace the file atomically with `data`, readable by its owner only (0600)."""
    path = path or config_path()
    try:
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(dict(data), fh, indent=2, sort_keys=True)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        os.chmod(path, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def update_file(path: Path | None = None, **changes: Any) -> Path:
    """Set (or, with None, remove) keys in the file, keeping the others."""
    path = path or config_path()
    data = read_file(path)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return write_file(data, path)


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """The effective settings: the file, then CAIRN_URL / CAIRN_TOKEN / CAIRN_PROJECT."""
    environ = os.environ if environ is None else environ
    path = config_path(environ)
    data = read_file(path)
    settings = Settings(path=path)
    for key in FILE_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value:
            setattr(settings, key, value)
    for key, var in ENV_OVERRIDES.items():
        value = environ.get(var)
        if value:
            setattr(settings, key, value)
            settings.from_env.add(key)
    return settings
