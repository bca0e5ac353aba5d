"""Who may call a deployment through the gateway (synchronous: the gateway runs it in a thread).

Three kinds of credentials, tried in this order:

- a deployment key, `cairndk_<prefix>_<secret>`, in `X-Cairn-Deployment-Key` or
  `Authorization: Bearer`: it opens its own deployment only;
- a Cairn API token (`Authorization: Bearer cairn_...`) of a member (or maintainer, owner) of the
  project; read-only tokens included: calling a deployment changes nothing in Cairn. A viewer
  gets 403 (unless the deployment is public);
- the dashboard's session cookie, same rule; for unsafe methods the request must also come from
  Cairn's own origin (the `Origin` header), so another site cannot make a browser call it.

A deployment whose spec says `public: true` may also be called without credentials (credentials
that are sent are still checked). No credentials, or ones that are wrong, revoked or expired: 401. Valid credentials that do not
open this deployment, or a project or deployment that does not exist: 404, the same answer, so
the gateway never tells anyone that another team's deployment exists.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from apps.accounts.models import TOKEN_PREFIX, ApiToken
from apps.accounts.selectors import api_token_find
from apps.core.proxy import origin_is_ours, session_user
from apps.projects.choices import Action, may_call_deployment, role_allows
from apps.projects.models import Project
from apps.projects.selectors import membership_role
from apps.workloads.choices import Kind
from apps.workloads.models import Workload

from .models import KEY_PREFIX, DeploymentKey, DeploymentRollout
from .selectors import Target, deployment_key_find, deployment_targets

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_TOUCH_SECONDS = 60


@dataclass
class Credentials:
    key: str = ""  # a deployment key
    token: str = ""  # an API token
    session_key: str = ""  # the session cookie
    malformed: bool = False  # an Authorization header Cairn cannot read as a token or key
    origin: str = ""
    host: str = ""

    @property
    def empty(self) -> bool:
        return not (self.key or self.token or self.session_key or self.malformed)


@dataclass
class Decision:
    status: int  # 200: go ahead; else the error to answer
    detail: str = ""
    workload_id: int | None = None
    targets: list[Target] = field(default_factory=list)
    workload_status: str = ""
    scales_to_zero: bool = False  # autoscaling with min_replicas 0: hold requests during a cold start
    canary_revision: int | None = None  # during a canary: its revision gets canary_weight % of requests
    canary_weight: int = 0


def credentials_from(headers: dict[bytes, bytes], cookies: dict[str, str]) -> Credentials:
    creds = Credentials(origin=headers.get(b"origin", b"").decode("latin-1"),
                        host=headers.get(b"host", b"").decode("latin-1"))
    creds.key = headers.get(b"x-cairn-deployment-key", b"").decode("latin-1").strip()
    authorization = headers.get(b"authorization", b"").decode("latin-1").split()
    if authorization:
        value = authorization[1] if len(authorization) == 2 and authorization[0] in ("Bearer", "Token") else ""
        if value.startswith(KEY_PREFIX) and not creds.key:
            creds.key = value
        elif value.startswith(TOKEN_PREFIX) and not value.startswith(KEY_PREFIX):
            creds.token = value
        elif not creds.key:
            creds.malformed = True
    creds.session_key = cookies.get(settings.SESSION_COOKIE_NAME, "")
    return creds


def _deployment(project: str, name: str) -> Workload | None:
    return (Workload.objects.select_related("project")
            .filter(project__slug=project, name=name, kind=Kind.DEPLOYMENT).first())


def _go(workload: Workload) -> Decision:
    autoscaling = (workload.spec or {}).get("autoscaling")
    rollout = DeploymentRollout.objects.filter(workload=workload, canary_revision__isnull=False).first()
    return Decision(200, workload_id=workload.pk, targets=deployment_targets(workload),
                    workload_status=workload.status,
                    scales_to_zero=isinstance(autoscaling, dict) and autoscaling.get("min_replicas") == 0,
                    canary_revision=rollout.canary_revision if rollout else None,
                    canary_weight=rollout.canary_weight if rollout else 0)


def authorize(*, project: str, name: str, method: str, creds: Credentials) -> Decision:
    if creds.empty:
        workload = _deployment(project, name)
        if workload is not None and (workload.spec or {}).get("public") is True:
            return _go(workload)  # public: true, an explicit opt-in of its maintainers
        return Decision(401, "Authentication required: a Cairn API token, a signed-in session or a deployment key "
                             "(Authorization: Bearer ..., or X-Cairn-Deployment-Key).")
    if creds.malformed:
        return Decision(401, "Authorization header must be 'Bearer <API token or deployment key>'.")
    if creds.key:
        key = deployment_key_find(creds.key)
        if key is None:
            return Decision(401, "Invalid deployment key.")
        if not key.is_active:
            return Decision(401, "This deployment key has been revoked.")
        workload = _deployment(project, name)
        if workload is None or workload.pk != key.workload_id:
            return Decision(404, "Deployment not found.")
        _touch(DeploymentKey, key)
        return _go(workload)
    if creds.token:
        api_token = api_token_find(creds.token)
        if api_token is None:
            return Decision(401, "Invalid API token.")
        if not api_token.is_active:
            return Decision(401, "This API token has been revoked or has expired.")
        if not api_token.user.is_active:
            return Decision(401, "User inactive.")
        user = api_token.user
        _touch(ApiToken, api_token)
    else:
        user = session_user(creds.session_key)
        if user is None:
            return Decision(401, "Your session has expired; sign in again, or use an API token or a deployment key.")
        if method not in SAFE_METHODS and not origin_is_ours(creds.origin, creds.host):
            return Decision(403, "A signed-in browser may only send this request from Cairn's own pages "
                                 "(Origin header); use an API token or a deployment key from elsewhere.")
    found = Project.objects.filter(slug=project).first()
    role = membership_role(user=user, project=found) if found is not None else None
    if not role_allows(role, Action.READ):
        return Decision(404, "Deployment not found.")
    workload = _deployment(project, name)
    if workload is None:
        return Decision(404, "Deployment not found.")
    if not may_call_deployment(role, public=(workload.spec or {}).get("public") is True):
        return Decision(403, "Calling a deployment needs the member role in its project (you are a viewer); "
                             "ask for a deployment key.")
    return _go(workload)


def _touch(model, row) -> None:
    """last_used_at, at most once a minute (cheap reads)."""
    now = timezone.now()
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() > _TOUCH_SECONDS:
        model.objects.filter(pk=row.pk).update(last_used_at=now)
