"""The command a notebook replica runs on the local backend (the kind decides it, not the spec).

Every IDE is served under Cairn's proxy at `proxy_prefix(workload)` (apps/notebooks/proxy.py):
JupyterLab is told that path as its base_url, so every page, asset and websocket URL it writes
works behind the proxy; code-server writes relative URLs and is served with the prefix removed.
"""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from django.conf import settings

from apps.workloads.kinds import LaunchRefused

from .choices import IDE

PREFIX = "/nb/"

# The header that carries Jupyter's token from Cairn's proxy when the Authorization header cannot
# (the Kubernetes API server's service proxy consumes Authorization for its own sign-in).
UPSTREAM_TOKEN_HEADER = "X-Cairn-Upstream-Token"

# code-server's session cookie. code-server runs with `--auth password` and HASHED_PASSWORD set to
# the notebook's token: with a HASHED_PASSWORD that is no argon2 hash, code-server accepts a
# request whose session cookie equals it, which is what Cairn's proxy sends. So code-server's port
# needs the same credential as Jupyter's, wherever it listens.
CODE_SERVER_COOKIE = "code-server-session"

# The token moves from JUPYTER_TOKEN (where the local backend puts it, never on a command line)
# to HASHED_PASSWORD, which code-server removes from its environment once read: neither reaches
# the IDE's terminals.
CODE_SERVER_LAUNCHER = 'export HASHED_PASSWORD="$JUPYTER_TOKEN"; unset JUPYTER_TOKEN; exec "$0" "$@"'

# The environment variable that carries the SHA-256 of the notebook's token to JupyterLab (hex):
# the notebook never holds the token itself, only what checks it (see JUPYTERLAB_LAUNCHER).
TOKEN_VERIFIER_ENV = "CAIRN_NOTEBOOK_TOKEN_SHA256"

# JupyterLab as `python -c` (the same on the local backend and in a Kubernetes pod): `python -m
# jupyterlab`, except that
# - it holds no usable credential (issue 44: code in a notebook read JUPYTER_TOKEN and opened the
#   notebook from elsewhere, past Cairn). It gets the token's SHA-256 (TOKEN_VERIFIER_ENV; or, on
#   Kubernetes, JUPYTER_TOKEN, hashed at once), removes both from its environment before anything
#   starts (kernels and terminals inherit what is left), and compares the SHA-256 of what a request
#   presents: only Cairn, which keeps the token (encrypted, apps/clusters/crypto.py), can present it.
#   The verifier shows up in Jupyter's runtime files; presenting it opens nothing. Jupyter's login
#   form and login cookies are off: every request carries the token (Cairn's proxy adds it), so a
#   cookie signed with a secret a kernel could read (jupyter_cookie_secret) opens nothing either.
# - the server process is made non-dumpable first (PR_SET_DUMPABLE 0): processes of the same user,
#   its kernels included, cannot read its memory or /proc/<pid>/environ;
# - the page it serves does not carry the server's token in its page config (JupyterLab puts it
#   there for the browser; behind Cairn's proxy the browser needs none);
# - the token is also read from UPSTREAM_TOKEN_HEADER.
JUPYTERLAB_LAUNCHER = f"""\
import ctypes, hashlib, os, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
except (OSError, AttributeError):
    pass
_plain = os.environ.pop("JUPYTER_TOKEN", "")
_verifier = os.environ.pop("{TOKEN_VERIFIER_ENV}", "") or (hashlib.sha256(_plain.encode()).hexdigest() if _plain else "")
os.environ.pop("JUPYTER_TOKEN_FILE", None)
del _plain
if not _verifier:
    sys.exit("cairn: no notebook token")
sys.argv.append("--IdentityProvider.token=" + _verifier)
from jupyter_server.auth.identity import IdentityProvider
from jupyterlab.labapp import LabApp
_get_token = IdentityProvider.get_token
def get_token(self, handler):
    presented = handler.request.headers.get("{UPSTREAM_TOKEN_HEADER}") or _get_token(self, handler)
    return hashlib.sha256(presented.encode()).hexdigest() if presented else ""
IdentityProvider.get_token = get_token
IdentityProvider.process_login_form = lambda self, handler: None
IdentityProvider.get_user_cookie = lambda self, handler: None
_initialize_handlers = LabApp.initialize_handlers
def initialize_handlers(self):
    _initialize_handlers(self)
    self.serverapp.web_app.settings.setdefault("page_config_data", {{}})["token"] = ""
LabApp.initialize_handlers = initialize_handlers
sys.exit(LabApp.launch_instance())
"""


def token_verifier(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def notebook_token_env(workload, token: str) -> dict[str, str]:
    """What a local notebook replica gets of its token (KindSpec.local_token_env): JupyterLab only
    its SHA-256; code-server the token itself (its session cookie is the token: JUPYTER_TOKEN, moved
    to HASHED_PASSWORD by CODE_SERVER_LAUNCHER), so a VS Code notebook relies on its port being
    out of other workloads' reach (docs/notebooks.md, "The notebook's token")."""
    if ide_of(workload) == IDE.VSCODE:
        return {"JUPYTER_TOKEN": token}
    return {TOKEN_VERIFIER_ENV: token_verifier(token)}


def proxy_prefix(workload) -> str:
    """The path Cairn's proxy serves the notebook at: /nb/<project>/<id>/."""
    return f"{PREFIX}{workload.project.slug}/{workload.pk}/"


def ide_of(workload) -> str:
    spec = workload.spec if isinstance(workload.spec, dict) else {}
    return spec.get("ide") or IDE.JUPYTERLAB


def code_server_path() -> str | None:
    """The code-server executable `make code-server` installed (or one on PATH), else None."""
    configured = Path(settings.CAIRN["CODE_SERVER"])
    if configured.is_file():
        return str(configured)
    return shutil.which("code-server")


def code_server_root(binary: str) -> str:
    """The directory a code-server installation lives in: the outermost `node_modules` its
    executable resolves into (npm installs it with its dependencies there), else its folder's parent."""
    real = Path(binary).resolve()
    parts = real.parts
    if "node_modules" in parts:
        return str(Path(*parts[:parts.index("node_modules") + 1]))
    return str(real.parent.parent)


def notebook_mounts(workload) -> list[str]:
    """What a sandboxed replica reads besides Cairn's Python: code-server's installation."""
    if ide_of(workload) == IDE.VSCODE and (binary := code_server_path()) is not None:
        return [code_server_root(binary)]
    return []


def bind_host() -> str:
    """The address local notebooks listen on and are reached at (CAIRN_NOTEBOOK_BIND_HOST)."""
    return settings.CAIRN["NOTEBOOK_BIND_HOST"] or "127.0.0.1"


def _loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


def notebook_command(workload, *, port: int | None, cwd: Path, as_root: bool) -> list[str]:
    if ide_of(workload) == IDE.VSCODE:
        return code_server_command(workload, port=port, cwd=cwd)
    return jupyterlab_command(workload, port=port, cwd=cwd, as_root=as_root)


def jupyterlab_command(workload, *, port: int | None, cwd: Path, as_root: bool) -> list[str]:
    """JupyterLab on bind_host():`port`, rooted at `cwd`, with base_url the proxy's prefix. It
    checks the token against its SHA-256 (TOKEN_VERIFIER_ENV in its environment, removed at once)."""
    host = bind_host()
    argv = [
        sys.executable, "-c", JUPYTERLAB_LAUNCHER, "--no-browser", "--ip", host, "--port", str(port),
        "--ServerApp.port_retries=0", f"--ServerApp.root_dir={cwd}",
        f"--ServerApp.base_url={proxy_prefix(workload)}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if as_root:  # a replica running as root: Jupyter refuses unless told
        argv.append("--allow-root")
    if not _loopback(host):  # else Jupyter refuses requests whose Host is not a local name; its token still applies
        argv.append("--ServerApp.allow_remote_access=True")
    return argv


def code_server_command(workload, *, port: int | None, cwd: Path) -> list[str]:
    """code-server on bind_host():`port`, opening `cwd`; it answers only requests carrying the
    notebook's token in CODE_SERVER_COOKIE (Cairn's proxy adds it), so people sign in to Cairn only."""
    binary = code_server_path()
    if binary is None:
        raise LaunchRefused("VS Code (code-server) is not installed on this server: an admin runs "
                            "`make code-server` (docs/notebooks.md).")
    return ["/bin/sh", "-c", CODE_SERVER_LAUNCHER, binary, "--auth", "password", "--bind-addr", f"{bind_host()}:{port}",
            "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", str(cwd)]
