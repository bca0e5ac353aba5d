"""Model versions on disk: an uploaded archive unpacked safely into the project's artifact store.

The archive (tar, optionally gzip) may hold only regular files and folders with relative names
and no '..' (tarfile's "data" filter, and a check of our own before it); at most MAX_FILES files
and settings.CAIRN["MODEL_MAX_BYTES"] bytes unpacked. The files are checksummed (sha256) and
made read-only; the folder is moved into place in one rename, so a version is there whole or not
at all.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import uuid
from pathlib import Path

MAX_FILES = 100_000


class ArchiveError(ValueError):
    """An archive Cairn will not unpack; the message is meant for the user."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def unpack(archive, *, into: Path, max_bytes: int) -> tuple[Path, list[dict], int]:
    """Unpack the archive (a file object) into a new staging folder inside `into`; returns the
    folder, its files [{"path", "size", "sha256"}] and their total size. ArchiveError otherwise."""
    into.mkdir(parents=True, exist_ok=True)
    staging = into / f".staging-{uuid.uuid4().hex}"
    staging.mkdir()
    try:
        try:
            tar = tarfile.open(fileobj=archive, mode="r:*")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"The upload is not a tar archive: {exc}") from None
        with tar:
            members, total = [], 0
            try:
                for member in tar:
                    name = member.name
                    if name.startswith("/") or ".." in Path(name).parts:
                        raise ArchiveError(f"'{name[:200]}' in the archive leads outside the model's folder.")
                    if not (member.isfile() or member.isdir()):
                        raise ArchiveError(f"'{name[:200]}' is not a regular file or folder (links and devices "
                                           "are refused).")
                    total += member.size if member.isfile() else 0
                    members.append(member)
                    if total > max_bytes:
                        raise ArchiveError(f"The model is larger than the {max_bytes} bytes Cairn accepts.")
                    if len(members) > MAX_FILES:
                        raise ArchiveError(f"The model holds more than {MAX_FILES} files.")
                tar.extractall(staging, members=members, filter="data")
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise ArchiveError(f"The archive could not be unpacked: {exc}") from None
        files = []
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            files.append({"path": str(path.relative_to(staging)), "size": path.stat().st_size,
                          "sha256": sha256_of(path)})
        if not files:
            raise ArchiveError("The model holds no files.")
        return staging, files, sum(f["size"] for f in files)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def make_read_only(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.chmod(dirpath, 0o555)


def remove_tree(root: Path) -> None:
    """Remove a read-only tree (make it writable first)."""
    if not root.exists():
        return
    for dirpath, _dirs, _files in os.walk(root):
        os.chmod(dirpath, 0o755)
    shutil.rmtree(root, ignore_errors=True)
