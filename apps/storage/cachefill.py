"""The node-local dataset cache filler: run before a replica, then exec'd into it.

    python cachefill.py JOB.json -- REPLICA-ARGV...

No Django and no Cairn imports (it runs as a plain script, outside the replica's sandbox, with the
dataset credentials the job file holds; the file is deleted as soon as it is read). For each
dataset version in the job it makes `<cache root>/<digest>/` hold the version's objects:

- one fill per node: the fill runs under an exclusive flock on `<digest>.lock`; concurrent
  fillers of the same version wait on it, find the version complete and reuse it;
- a fill downloads into `<digest>.partial/`, checks every object's size and, where the ETag is an
  MD5 (single-part uploads), its MD5 against the manifest, writes `.complete`, and only then
  renames the folder to `<digest>/`: an interrupted or corrupt fill is never used (the next
  filler removes the leftover `.partial` and starts again);
- reuse checks the `.complete` marker and every file's size against the manifest;
- the cache is bounded (job's `max_bytes`) and least-recently-used: after a fill, complete
  versions are evicted, oldest use first, until the total fits, except those in use;
- "in use" is a shared flock on `<digest>.lock` that this process takes, keeps across exec and
  so hands to the replica: it lasts as long as the replica's processes hold the descriptor.

The job file: {"cache_root", "max_bytes", "entries": [{"digest", "store": {...}, "manifest":
[{"key", "size", "etag"}]}], "report_path" (optional)}. With `report_path` (on Kubernetes the
init container's /dev/termination-log), a successful run writes there what the node's cache holds
now (`report`): the kubelet puts it in the pod's status, where Cairn's reconciler reads it.
Exit code 75 (EX_TEMPFAIL) with a message on stderr when a
fill fails; the replica is then not started.
"""
from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

EX_TEMPFAIL = 75
COMPLETE = ".complete"
LAST_USED = ".last_used"
DATA = "data"


class FillError(Exception):
    pass


def log(message: str) -> None:
    print(f"cairn cache: {message}", file=sys.stderr, flush=True)


def _allowed(entry: str) -> tuple[str, int | None]:
    try:
        return str(ipaddress.ip_address(entry)), None
    except ValueError:
        parts = urlsplit(f"//{entry}")
        return (parts.hostname or "").lower(), parts.port


def check_endpoint(store: dict) -> None:
    """The registration's rule again at fill time, as apps/core/netguard.py applies it (this
    script cannot import Cairn): every address of the endpoint's host must be public unless the
    host is one the job allows (`fetch_allowed_hosts`). The name may resolve elsewhere now."""
    endpoint = store.get("endpoint_url") or ""
    if not endpoint or "fetch_allowed_hosts" not in store:
        return  # AWS itself; or a job from a caller that does not pass the rule (datasets_of does)
    parts = urlsplit(endpoint)
    host, port = (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)
    allowed = [_allowed(e) for e in store.get("fetch_allowed_hosts") or [] if isinstance(e, str)]
    import socket  # here: see main()

    try:
        addresses = {info[4][0].split("%", 1)[0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        raise FillError(f"the endpoint's host '{host}' could not be resolved") from None
    for address in addresses:
        ip = ipaddress.ip_address(address)
        ip = ip.ipv4_mapped or ip if ip.version == 6 else ip
        if ip.is_global and not ip.is_multicast and not (ip.version == 4 and ip in ipaddress.ip_network("100.64.0.0/10")):
            continue
        if not any(name in (host, str(ipaddress.ip_address(address))) and allowed_port in (None, port)
                   for name, allowed_port in allowed):
            raise FillError(f"the endpoint's host '{host}' resolves to a private, loopback or link-local address, "
                            "which the pool does not allow")


_STATUS = re.compile(r"status(?: code)?: (\d{3})\b")


def _failure(exc: Exception) -> str:
    """What failed, without the endpoint's answer (obstore's messages carry its body)."""
    if isinstance(exc, FillError):
        return str(exc)
    status = _STATUS.search(str(exc))
    if status:
        return f"the endpoint answered HTTP {status.group(1)}"
    text = str(exc).lower()
    if "timed out" in text or "timeout" in text:
        return "the endpoint did not answer in time"
    if "connect" in text or "sending request" in text or "dns" in text:
        return "the endpoint could not be reached"
    return f"{type(exc).__name__} while reading the store (its answer is not shown)"


def _store(store: dict):
    from obstore.store import S3Store

    check_endpoint(store)

    options: dict = {"region": store.get("region") or "us-east-1"}  # obstore refuses None values
    if store.get("prefix"):
        options["prefix"] = store["prefix"]
    if store.get("endpoint_url"):
        options.update(endpoint=store["endpoint_url"], allow_http=store["endpoint_url"].startswith("http://"))
    if store.get("access_key_id"):
        options.update(access_key_id=store["access_key_id"], secret_access_key=store.get("secret_access_key") or "")
    else:
        options["skip_signature"] = True
    return S3Store(store["bucket"], **options)


def _md5_etag(etag: str | None) -> str | None:
    value = (etag or "").strip('"')
    return value if len(value) == 32 and all(c in "0123456789abcdef" for c in value) else None


def complete(entry: Path, manifest: list[dict]) -> bool:
    """The version is there whole: marker present, every file of the manifest at its size."""
    if not (entry / COMPLETE).is_file():
        return False
    for item in manifest:
        path = entry / DATA / item["key"]
        try:
            if path.stat().st_size != int(item["size"]):
                return False
        except OSError:
            return False
    return True


def download(store: dict, manifest: list[dict], into: Path) -> int:
    import obstore

    client = _store(store)
    total = 0
    for item in manifest:
        key = item["key"]
        if key.startswith("/") or ".." in key.split("/"):
            raise FillError(f"refusing object key {key!r}")
        target = into / DATA / key
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.md5(usedforsecurity=False)
        size = 0
        with open(target, "wb") as out:
            for chunk in obstore.get(client, key).stream(min_chunk_size=1 << 20):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        if size != int(item["size"]):
            raise FillError(f"{key}: got {size} bytes, the version's manifest says {item['size']}")
        expected = _md5_etag(item.get("etag"))
        if expected and digest.hexdigest() != expected:
            raise FillError(f"{key}: checksum {digest.hexdigest()} differs from the manifest's {expected}")
        total += size
    return total


def entry_bytes(entry: Path) -> int:
    return sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())


def evict(root: Path, *, max_bytes: int, keep: set[str]) -> list[str]:
    """Remove least-recently-used complete versions not in use until the cache fits."""
    entries = []
    for path in root.iterdir():
        if path.is_dir() and not path.name.endswith(".partial") and (path / COMPLETE).exists():
            try:
                used = (path / LAST_USED).stat().st_mtime
            except OSError:
                used = 0.0
            entries.append((used, path))
    total = sum(entry_bytes(p) for _, p in entries)
    evicted = []
    for _, path in sorted(entries):
        if total <= max_bytes:
            break
        if path.name in keep:
            continue
        with open(root / f"{path.name}.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use by a running replica
            size = entry_bytes(path)
            shutil.rmtree(path, ignore_errors=True)
            total -= size
            evicted.append(path.name)
    return evicted


def ensure(root: Path, item: dict) -> int:
    """Make the version complete in the cache; returns the descriptor of its shared lock."""
    digest, manifest = item["digest"], item["manifest"]
    entry, partial = root / digest, root / f"{digest}.partial"
    fd = os.open(root / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    started = time.monotonic()
    fcntl.flock(fd, fcntl.LOCK_EX)  # concurrent fillers of this version wait here
    waited = time.monotonic() - started
    if complete(entry, manifest):
        log(f"{item.get('name', digest)}: cached on this node, reused" + (f" (waited {waited:.1f}s for a fill)"
                                                                          if waited > 0.5 else ""))
    else:
        shutil.rmtree(partial, ignore_errors=True)  # a fill that was interrupted: never used
        shutil.rmtree(entry, ignore_errors=True)  # incomplete or damaged: filled again
        partial.mkdir(parents=True)
        log(f"{item.get('name', digest)}: filling the node cache ({len(manifest)} objects)")
        began = time.monotonic()
        total = download(item["store"], manifest, partial)
        (partial / COMPLETE).write_text(json.dumps({"digest": digest, "bytes": total, "filled_at": time.time()}))
        os.replace(partial, entry)
        log(f"{item.get('name', digest)}: filled {total} bytes in {time.monotonic() - began:.1f}s")
    (entry / LAST_USED).touch()
    fcntl.flock(fd, fcntl.LOCK_SH)  # in use: eviction passes it by
    os.set_inheritable(fd, True)  # held by the replica after exec
    return fd


REPORT_LIMIT = 4000  # bytes: the kubelet keeps at most 4096 of a termination message


def held(root: Path) -> dict[str, int]:
    """digest -> bytes of every complete version in the cache."""
    out: dict[str, int] = {}
    for path in root.iterdir():
        marker = path / COMPLETE
        if path.is_dir() and not path.name.endswith(".partial") and marker.is_file():
            try:
                out[path.name] = int(json.loads(marker.read_text()).get("bytes", 0))
            except (OSError, ValueError, AttributeError):
                continue
    return out


def report(root: Path, *, filled: list[str], evicted: list[str]) -> str:
    """What the node's cache holds, as JSON of at most REPORT_LIMIT bytes: every complete version
    ("complete": true), or when that is too long, only this job's versions and the evictions
    ("complete": false; Cairn then adds and removes instead of replacing the node's list)."""
    now = round(time.time(), 3)
    present = held(root)
    text = json.dumps({"v": 1, "at": now, "complete": True, "held": present, "evicted": evicted},
                      separators=(",", ":"))
    if len(text) <= REPORT_LIMIT:
        return text
    mine = {d: present[d] for d in filled if d in present}
    gone = list(evicted)
    while True:
        text = json.dumps({"v": 1, "at": now, "complete": False, "held": mine, "evicted": gone}, separators=(",", ":"))
        if len(text) <= REPORT_LIMIT:
            return text
        # What does not fit is only a hint lost: an eviction Cairn misses makes it prefer a node
        # that must fill again, a version it misses makes it prefer no node for it.
        if gone:
            gone.pop()
        else:
            mine.popitem()


def main(argv: list[str]) -> int:
    # Run as a script, this folder is first on sys.path, and its selectors.py (Cairn's) would
    # shadow the standard library's, which socket imports.
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    if "--" not in argv or len(argv) < 3:
        log("usage: cachefill.py JOB.json -- ARGV...")
        return 64
    split = argv.index("--")
    job_path, command = Path(argv[1]), argv[split + 1:]
    try:
        job = json.loads(job_path.read_text())
    finally:
        try:
            job_path.unlink(missing_ok=True)  # it holds credentials
        except OSError:
            pass  # a read-only Secret volume on Kubernetes: it goes with the pod
    job.setdefault("cache_root", os.environ.get("CAIRN_DATASET_CACHE_DIR", "/var/lib/cairn/dataset-cache"))
    root = Path(job["cache_root"])
    root.mkdir(parents=True, exist_ok=True)
    try:
        for item in job["entries"]:
            ensure(root, item)
        evicted = evict(root, max_bytes=int(job["max_bytes"]), keep={i["digest"] for i in job["entries"]})
        if evicted:
            log(f"evicted {len(evicted)} least recently used version(s) to stay under {job['max_bytes']} bytes")
        if job.get("report_path"):
            Path(job["report_path"]).write_text(
                report(root, filled=[i["digest"] for i in job["entries"]], evicted=evicted))
    except Exception as exc:  # noqa: BLE001 - anything: the replica must not start on a bad cache
        log(f"the dataset could not be cached: {_failure(exc)}")
        return EX_TEMPFAIL
    if not command:
        return 0
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
