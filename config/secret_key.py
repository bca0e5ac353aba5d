"""SECRET_KEY of embedded mode: made at random on the first run and kept in the data folder.

Django signs sessions with SECRET_KEY, and the key for stored credentials (apps/clusters/crypto.py)
and the notebook token on Kubernetes derive from it. The public default let anyone who read the
source forge them. Server mode takes SECRET_KEY from the environment and refuses the default
(system check cairn.E001, apps/core/checks.py)."""
import os
import secrets
from pathlib import Path

DEFAULT_SECRET_KEY = "insecure-dev-key-change-me-" + "x" * 40
FILE_NAME = "secret_key"


def embedded_secret_key(data_dir: Path) -> str:
    """The key in `<data_dir>/secret_key` (mode 0600), made now if the file is not there. Two
    processes starting at once agree: the file appears whole (a hard link of a written file) or
    not at all, and the loser reads the winner's."""
    from django.core.exceptions import ImproperlyConfigured

    path = Path(data_dir) / FILE_NAME
    try:
        existing = path.read_text().strip()
        if existing:
            return existing
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ImproperlyConfigured(f"Cannot read Cairn's secret key {path}: {exc.strerror}. Set SECRET_KEY.") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(key + "\n")
            try:
                os.link(temporary, path)
            except FileExistsError:  # another process made it first
                key = path.read_text().strip()
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"Cannot keep Cairn's secret key in {path}: {exc.strerror}. Make the data folder (CAIRN_DATA_DIR) "
            f"writable, or set SECRET_KEY.") from None
    return key
