"""Reading dataset sources: listing an S3-compatible prefix (obstore) or a host path into a
version manifest [{"key", "size", "etag"}], sorted by key, and its digest (the cache key)."""
from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import timedelta
from pathlib import Path

from apps.core.netguard import FetchGuard, Policy

MAX_OBJECTS = 1_000_000


class SourceError(Exception):
    """The source could not be read; the message is meant for the user."""


def s3_store(location: dict, credentials: dict, *, proxy_url: str = ""):
    from obstore.store import S3Store

    options = store_options(location, credentials)
    if proxy_url:
        options["client_options"]["proxy_url"] = proxy_url
    return S3Store(location["bucket"], **options)


def store_options(location: dict, credentials: dict) -> dict:
    """obstore's S3Store keyword arguments (only those with a value: it refuses None), with short
    timeouts and few retries so that an unreachable endpoint answers in seconds."""
    endpoint = location.get("endpoint_url") or ""
    options: dict = {"region": location.get("region") or "us-east-1",
                     "client_options": {"connect_timeout": "5s", "timeout": "60s"},
                     "retry_config": {"max_retries": 2, "backoff": {"init_backoff": timedelta(milliseconds=100),
                                                                    "max_backoff": timedelta(seconds=2), "base": 2},
                                      "retry_timeout": timedelta(seconds=15)}}
    if location.get("prefix"):
        options["prefix"] = location["prefix"]
    if endpoint:
        options["endpoint"] = endpoint
        options["allow_http"] = endpoint.startswith("http://")
    if credentials.get("access_key_id"):
        options["access_key_id"] = credentials["access_key_id"]
        options["secret_access_key"] = credentials.get("secret_access_key") or ""
    else:
        options["skip_signature"] = True
    return options


_STATUS = re.compile(r"status(?: code)?: (\d{3})\b")


def fetch_failure(exc: Exception) -> str:
    """What went wrong, in words of Cairn's own: obstore's message carries the endpoint's answer
    (its body), which is never shown - the endpoint may be a service the user should not read."""
    text = str(exc)
    status = _STATUS.search(text)
    if status:
        return f"the endpoint answered HTTP {status.group(1)}"
    lowered = text.lower()
    if "timed out" in lowered or "timeout" in lowered:
        return "the endpoint did not answer in time"
    if "dns" in lowered or "resolve" in lowered:
        return "the endpoint's host could not be resolved"
    if "connect" in lowered or "sending request" in lowered:
        return "the endpoint could not be reached"
    return "the endpoint's answer was not an S3 listing"


def s3_manifest(location: dict, credentials: dict, *, policy: Policy | None = None) -> list[dict]:
    """The listing of the location's prefix. Every connection goes through a FetchGuard with
    `policy` (apps/core/netguard.py): no loopback, private or metadata address unless allowed."""
    guard = FetchGuard(policy or Policy())
    try:
        with guard:
            store = s3_store(location, credentials, proxy_url=guard.proxy_url)
            items = []
            for batch in store.list():
                for meta in batch:
                    items.append({"key": meta["path"], "size": int(meta["size"]), "etag": (meta.get("e_tag") or "")})
                    if len(items) > MAX_OBJECTS:
                        raise SourceError(f"The prefix holds more than {MAX_OBJECTS} objects.")
    except SourceError:
        raise
    except Exception as exc:  # noqa: BLE001 - obstore raises its own error types
        if guard.refusal:
            raise SourceError(guard.refusal) from None
        raise SourceError(f"The S3 prefix could not be listed: {fetch_failure(exc)}.") from None
    return sorted(items, key=lambda i: i["key"])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def host_path_manifest(path: str) -> list[dict]:
    root = Path(path)
    if not root.is_dir():
        raise SourceError(f"'{path}' is not a directory on this machine.")
    items = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            items.append({"key": str(full.relative_to(root)), "size": full.stat().st_size,
                          "etag": f"sha256:{_sha256(full)}"})
            if len(items) > MAX_OBJECTS:
                raise SourceError(f"The folder holds more than {MAX_OBJECTS} files.")
    return sorted(items, key=lambda i: i["key"])


# A file modified after this long before its version was recorded is hashed again by the drift
# check (the manifest was walked, and hashed, before the version row was written).
DRIFT_SLACK_SECONDS = 120.0


def host_path_drift(path: str, manifest: list[dict], *, recorded_at: float) -> str:
    """How the folder differs from a version's manifest ("" when it does not, or when the folder
    is not on this machine): files added, removed, or changed. Sizes decide without reading; a
    file whose modification time is later than the version (less DRIFT_SLACK_SECONDS) is hashed
    again, so only what may have changed is read."""
    root = Path(path)
    if not root.is_dir():
        return ""
    recorded = {item["key"]: item for item in manifest}
    added, changed, seen = [], [], set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            key = str(full.relative_to(root))
            seen.add(key)
            item = recorded.get(key)
            if item is None:
                added.append(key)
                continue
            stat = full.stat()
            if stat.st_size != item["size"] or (stat.st_mtime > recorded_at - DRIFT_SLACK_SECONDS
                                                and f"sha256:{_sha256(full)}" != item["etag"]):
                changed.append(key)
    removed = sorted(set(recorded) - seen)
    parts = [f"{len(keys)} file(s) {what} ({', '.join(sorted(keys)[:3])}{', ...' if len(keys) > 3 else ''})"
             for what, keys in (("added", added), ("changed", changed), ("removed", removed)) if keys]
    return "; ".join(parts)


def manifest_digest(source: str, location: dict, manifest: list[dict]) -> str:
    body = json.dumps({"source": source, "location": location, "manifest": manifest}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()
