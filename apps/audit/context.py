"""Where an action comes from: the request being served, kept for the services it calls.

`AuditRequestMiddleware` remembers the current request in a context variable, so a service
(`quota_update`, `api_token_revoke`, ...) records who and from where without every caller
passing the request down. Outside a request (management commands, the scheduler) there is none:
the record then has no actor and no address.
"""
import ipaddress
from contextvars import ContextVar

from django.conf import settings
from django.http import HttpRequest
from rest_framework.throttling import ScopedRateThrottle

from apps.core.proxyheaders import forwarded_allow_ips, is_trusted, uvicorn_proxy_options  # noqa: F401 (re-exported)

_current_request: ContextVar[HttpRequest | None] = ContextVar("cairn_audit_request", default=None)

USER_AGENT_MAX = 255


def current_request() -> HttpRequest | None:
    return _current_request.get()


class AuditRequestMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        token = _current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            _current_request.reset(token)


def _valid_ip(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str | None:
    """The address a request came from: the TCP peer (REMOTE_ADDR), unless the peer is a proxy
    CAIRN_FORWARDED_ALLOW_IPS names. Then X-Forwarded-For: with CAIRN_TRUSTED_PROXIES=N, the N-th
    address from the right (the one the outermost proxy saw); else the right-most address that
    is not a trusted proxy (as uvicorn does). Addresses further left are the client's claims."""
    meta = request.META
    remote = _valid_ip(meta.get("REMOTE_ADDR"))
    allowed = forwarded_allow_ips()
    if remote is None or not allowed or not is_trusted(remote, allowed):
        return remote
    hops = [hop.strip() for hop in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    proxies = int(settings.CAIRN.get("TRUSTED_PROXIES", 0) or 0)
    if proxies > 0:
        return (_valid_ip(hops[-proxies]) or remote) if len(hops) >= proxies else remote
    for hop in reversed(hops):
        ip = _valid_ip(hop)
        if ip is None:
            return remote
        if not is_trusted(ip, allowed):
            return ip
    return _valid_ip(hops[0]) if hops else remote


class ClientScopedRateThrottle(ScopedRateThrottle):
    """DRF's scoped throttle counted per client_ip(). DRF's own ident is the whole
    X-Forwarded-For when NUM_PROXIES is unset: a client that changes the header changes its
    bucket (23 sign-in attempts without a 429)."""

    def get_ident(self, request):
        return client_ip(request) or ""


def user_agent(request: HttpRequest) -> str:
    text = str(request.META.get("HTTP_USER_AGENT", ""))
    return text.replace("\x00", "")[:USER_AGENT_MAX]
