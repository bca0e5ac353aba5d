"""Who may open a notebook through Cairn's proxy, and where its IDE is (synchronous: the proxy
runs it in a thread).

- Signed in with the dashboard's session cookie, or an API token with the write scope
  (`Authorization: Bearer cairn_...`; opening a notebook runs code). Neither: 401 (the proxy
  sends a browser to the sign-in page instead).
- A session counts for a websocket only when the socket's `Origin` is Cairn's own (its Host, or
  one of CSRF_TRUSTED_ORIGINS); the same for unsafe HTTP methods. Another site's page cannot use
  a signed-in browser to drive a kernel (cross-site websocket hijacking).
- The notebook's creator may open it; the project's owners and maintainers too when the project
  turns `shared_notebooks` on. Other members: 403. Not a member, no such project or notebook:
  404, one answer for all three.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings

from apps.accounts.models import ApiTokenScope
from apps.accounts.selectors import api_token_find
from apps.clusters.crypto import CredentialsUnreadable, unseal
from apps.core.proxy import origin_is_ours, session_user
from apps.projects.choices import Action, role_allows
from apps.projects.selectors import membership_role
from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.runtime import Runtime

from .commands import CODE_SERVER_COOKIE, ide_of, proxy_prefix

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Upstream:
    """Where the proxy sends a notebook's requests: `base` (scheme://host[:port][/path], no
    trailing slash) + the request's path; `headers` carry the upstream credential."""

    base: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    verify: object = True  # TLS: True (verify), False (don't), or an ssl.SSLContext
    strip_prefix: bool = False  # the IDE serves at / (code-server), not at the proxy's prefix


# Backends whose notebooks are not reached at runtime["url"] register how to reach them here
# (from AppConfig.ready(); notebooks sit below backends). resolver(workload, token) -> Upstream | None.
upstream_resolvers: dict[str, Callable[[Workload, str], Upstream | None]] = {}


@dataclass
class Credentials:
    token: str = ""
    session_key: str = ""
    malformed: bool = False
    origin: str = ""
    host: str = ""


@dataclass
class Decision:
    status: int  # 200: go ahead; else the error to answer
    detail: str = ""
    upstream: Upstream | None = None
    user_id: int | None = None
    username: str = ""
    workload_id: int | None = None
    project_id: int | None = None
    audit: dict = field(default_factory=dict)


def credentials_from(headers: dict[bytes, bytes], cookies: dict[str, str]) -> Credentials:
    creds = Credentials(origin=headers.get(b"origin", b"").decode("latin-1"),
                        host=headers.get(b"host", b"").decode("latin-1"))
    authorization = headers.get(b"authorization", b"").decode("latin-1").split()
    if authorization:
        if len(authorization) == 2 and authorization[0] in ("Bearer", "Token"):
            creds.token = authorization[1]
        else:
            creds.malformed = True
    creds.session_key = cookies.get(settings.SESSION_COOKIE_NAME, "")
    return creds


def same_origin(creds: Credentials) -> bool:
    return origin_is_ours(creds.origin, creds.host)


def _user(creds: Credentials, *, websocket: bool, method: str):
    """(user, None) or (None, refusal)."""
    if creds.malformed:
        return None, Decision(401, "Authorization header must be 'Bearer <API token>'.")
    if creds.token:
        api_token = api_token_find(creds.token)
        if api_token is None:
            return None, Decision(401, "Invalid API token.")
        if not api_token.is_active:
            return None, Decision(401, "This API token has been revoked or has expired.")
        if not api_token.user.is_active:
            return None, Decision(401, "User inactive.")
        if not api_token.allows(ApiTokenScope.WRITE):
            return None, Decision(403, "Opening a notebook runs code: the API token needs the write scope.")
        return api_token.user, None
    if not creds.session_key:
        return None, Decision(401, "Sign in to open this notebook (or send an API token).")
    if (websocket or method not in SAFE_METHODS) and not same_origin(creds):
        # Refused before the session is even read: a foreign page gets nothing from the cookie.
        return None, Decision(403, "A signed-in browser may only do this from Cairn's own pages (Origin header).")
    user = session_user(creds.session_key)
    if user is None:
        return None, Decision(401, "Your session has ended; sign in again.")
    return user, None


def default_upstream(workload: Workload, token: str) -> Upstream | None:
    """A notebook that listens on a TCP address Cairn can reach (the local backend)."""
    url = Runtime.of(workload).url
    if not url.startswith(("http://", "https://")):
        return None
    parts = urlsplit(url)
    return Upstream(base=f"{parts.scheme}://{parts.netloc}",
                    headers=((b"authorization", f"token {token}".encode()),) if token else ())


def runtime_token(workload: Workload) -> str:
    """The notebook's token, kept encrypted in its runtime (apps.clusters.crypto.seal); "" when
    there is none. CredentialsUnreadable when the key it was sealed with is gone."""
    token = Runtime.of(workload).sealed_token
    return unseal(token) if token else ""


def upstream_of(workload: Workload) -> Upstream | None:
    token = runtime_token(workload)
    resolver = upstream_resolvers.get(Runtime.of(workload).backend, default_upstream)
    upstream = resolver(workload, token)
    if upstream is not None and ide_of(workload) == "vscode":  # code-server reads its credential from a cookie
        cookie = (b"cookie", f"{CODE_SERVER_COOKIE}={token}".encode()) if token else None
        upstream = Upstream(base=upstream.base, headers=(*upstream.headers, *([cookie] if cookie else [])),
                            verify=upstream.verify, strip_prefix=True)
    return upstream


def authorize(*, project: str, workload_id: str, method: str, creds: Credentials, websocket: bool) -> Decision:
    user, refusal = _user(creds, websocket=websocket, method=method)
    if refusal is not None:
        return refusal
    not_found = Decision(404, "Notebook not found.")
    if not workload_id.isdigit() or len(workload_id) > 18:
        return not_found
    workload = (Workload.objects.select_related("project")
                .filter(pk=int(workload_id), project__slug=project, kind=Kind.NOTEBOOK).first())
    if workload is None:
        return not_found
    role = membership_role(user=user, project=workload.project)
    if not role_allows(role, Action.READ):
        return not_found
    creator = workload.created_by_id is not None and workload.created_by_id == user.pk
    shared = workload.project.shared_notebooks and role_allows(role, Action.OPEN_SHARED_NOTEBOOKS)
    if not (creator or shared):
        detail = ("Only the notebook's creator can open it." if not workload.project.shared_notebooks else
                  "Only the notebook's creator and the project's owners and maintainers can open it.")
        return Decision(403, detail)
    decision = Decision(200, user_id=user.pk, username=user.get_username(), workload_id=workload.pk,
                        project_id=workload.project_id,
                        audit={"attempt": workload.attempt, "as": "creator" if creator else role})
    if workload.status != WorkloadStatus.RUNNING:
        decision.status, decision.detail = 409, (f"Notebook '{workload.name}' is {workload.status}, not running: "
                                                 "start it again to open it.")
        return decision
    try:
        decision.upstream = upstream_of(workload)
    except CredentialsUnreadable:
        decision.status, decision.detail = 503, (f"Notebook '{workload.name}' cannot be reached: its token was "
                                                 "encrypted with a key Cairn no longer has; start it again.")
        return decision
    if decision.upstream is None:
        decision.status, decision.detail = 503, f"Notebook '{workload.name}' has no address yet; try again shortly."
    return decision


def prefix_of(project: str, workload_id: str) -> str:
    return f"/nb/{project}/{workload_id}/"


__all__ = ["Credentials", "Decision", "Upstream", "authorize", "credentials_from", "prefix_of", "proxy_prefix",
           "upstream_resolvers"]
