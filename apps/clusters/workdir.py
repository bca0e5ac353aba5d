"""Where a replica may start: the workload's own folder, or a directory an admin allows on the pool.

Two checks, both pure (no database, no settings):

- `check_working_dir` at submit, on the text alone: a relative path names a folder inside the
  workload's own folder and may not climb out of it; an absolute path must lie inside one of the
  pool's allowed roots. It does not touch the file system, so it cannot be fooled by it either:
- `resolve_working_dir` at launch resolves symlinks (realpath) and checks the result again, so a
  symlink planted in the work folder (`work/etc -> /etc`) or in an allowed root does not lead out.

`denied_roots` are never allowed, even inside an allowed root (callers pass Cairn's data folder, so
allowing a checkout that holds `var/` does not open the database or other workloads' folders).

On Kubernetes the path is inside the container and allowed roots do not apply:
`check_container_working_dir` only insists on an absolute path without `..`.

It lives with the pools whose allowed_paths it checks (ResourcePool.clean), below the workloads,
training and backends that check working directories with it.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

MAX_LENGTH = 4096  # PATH_MAX on Linux


class WorkingDirError(ValueError):
    """A working directory that is not allowed; the message is meant for the user."""


def _roots_text(allowed_roots: Sequence[str]) -> str:
    if not allowed_roots:
        return ("Give a path relative to the workload's own folder (for example 'src'); this pool allows no "
                "other directory (a Cairn admin can allow one on the pool).")
    return ("Give a path relative to the workload's own folder (for example 'src'), or one inside a directory "
            f"this pool allows: {', '.join(sorted(allowed_roots))}.")


def check_working_dir_form(value: str) -> str:
    """What every working directory must be, whatever the pool: a non-empty string without NUL,
    surrounding white space, a leading '~' or a '..' segment, at most MAX_LENGTH long."""
    if not isinstance(value, str):
        raise WorkingDirError("Give the working directory as a string.")
    if not value.strip():
        raise WorkingDirError("The working directory is empty.")
    if "\x00" in value:
        raise WorkingDirError("The working directory contains a NUL character.")
    if len(value) > MAX_LENGTH:
        raise WorkingDirError(f"The working directory is longer than {MAX_LENGTH} characters.")
    if value != value.strip():
        raise WorkingDirError("The working directory starts or ends with white space.")
    if value.startswith("~"):
        raise WorkingDirError("'~' is not expanded: give an absolute path or one relative to the workload's folder.")
    if ".." in PurePosixPath(value).parts:
        raise WorkingDirError("The working directory may not contain '..'.")
    return value


def normalise_root(value: str) -> str:
    """An allowed root as stored: absolute, no '..', no '.', no trailing or doubled '/'.

    Raises WorkingDirError when it is not one (the admin form and the pool API use it).
    """
    value = check_working_dir_form(value)
    if not value.startswith("/"):
        raise WorkingDirError(f"'{value}' is not an absolute path.")
    normal = os.path.normpath(value)
    if normal.startswith("//"):  # POSIX keeps a leading '//' apart; Linux does not
        normal = "/" + normal.lstrip("/")
    if normal == "/":
        raise WorkingDirError("'/' cannot be allowed: it holds Cairn's own files and every other workload's.")
    return normal


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _normal_roots(roots: Sequence[str]) -> list[str]:
    out = []
    for root in roots:
        try:
            out.append(normalise_root(root))
        except WorkingDirError:
            continue  # a malformed stored root allows nothing
    return out


def check_working_dir(value: str, *, allowed_roots: Sequence[str], denied_roots: Sequence[str] = ()) -> str:
    """The working directory as stored, or WorkingDirError saying why it is refused.

    A relative path comes back normalised ('a//b/.' -> 'a/b', '.' stays '.'); an absolute one too.
    """
    value = check_working_dir_form(value)
    if not value.startswith("/"):
        return os.path.normpath(value)
    path = os.path.normpath(value)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    for denied in _normal_roots(denied_roots):
        if _inside(path, denied):
            raise WorkingDirError(f"'{path}' is inside Cairn's own data folder. {_roots_text(allowed_roots)}")
    if not any(_inside(path, root) for root in _normal_roots(allowed_roots)):
        raise WorkingDirError(f"'{path}' is outside the allowed directories. {_roots_text(allowed_roots)}")
    return path


def check_container_working_dir(value: str) -> str:
    """A working directory inside a container (Kubernetes): absolute, without '..'."""
    value = check_working_dir_form(value)
    if not value.startswith("/"):
        raise WorkingDirError("On a Kubernetes pool the working directory is a path inside the container: "
                              "give an absolute path such as '/workspace'.")
    return os.path.normpath(value)


def resolve_working_dir(
    value: str | None, *, work_dir: Path, allowed_roots: Sequence[str], denied_roots: Sequence[str] = ()
) -> Path:
    """The directory a replica starts in, symlinks resolved, checked again on the real file system.

    No value: `work_dir` (created). A relative value: a folder inside `work_dir` (created when
    missing). An absolute value: an existing directory inside an allowed root. WorkingDirError
    when the real path lies elsewhere, e.g. through a symlink.
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    base = os.path.realpath(work_dir)
    if not value:
        return Path(base)
    value = check_working_dir(value, allowed_roots=allowed_roots, denied_roots=denied_roots)
    if not value.startswith("/"):
        target = os.path.realpath(os.path.join(base, value))
        if not _inside(target, base):
            raise WorkingDirError(f"'{value}' leads out of the workload's folder (through a symbolic link).")
        os.makedirs(target, exist_ok=True)
        # Created through nothing but real directories just checked; check once more all the same.
        again = os.path.realpath(target)
        if not _inside(again, base) or not os.path.isdir(again):
            raise WorkingDirError(f"'{value}' leads out of the workload's folder (through a symbolic link).")
        return Path(again)
    target = os.path.realpath(value)
    real_denied = [os.path.realpath(d) for d in _normal_roots(denied_roots)]
    if any(_inside(target, d) for d in real_denied):
        raise WorkingDirError(f"'{value}' leads into Cairn's own data folder. {_roots_text(allowed_roots)}")
    real_roots = [os.path.realpath(r) for r in _normal_roots(allowed_roots)]
    if not any(_inside(target, r) for r in real_roots):
        raise WorkingDirError(f"'{value}' leads outside the allowed directories (through a symbolic link). "
                              f"{_roots_text(allowed_roots)}")
    if not os.path.isdir(target):
        raise WorkingDirError(f"Working directory '{value}' does not exist on this machine.")
    return Path(target)


def allowed_paths_clean(value) -> list[str]:
    """A pool's allowed_paths as stored: normalised absolute directories ('/data/x/' -> '/data/x'), no
    duplicates.

    Raises WorkingDirError naming the first bad entry.
    """
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WorkingDirError('Give a list of absolute directory paths, e.g. ["/data/shared"].')
    if len(value) > 100:
        raise WorkingDirError("At most 100 allowed directories per pool.")
    out: list[str] = []
    for entry in value:
        try:
            root = normalise_root(entry)
        except WorkingDirError as exc:
            raise WorkingDirError(f"'{entry[:200]}': {exc}") from None
        if root not in out:
            out.append(root)
    return out
