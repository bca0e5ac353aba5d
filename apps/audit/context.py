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
    """REMOTE_ADDR, or with CAIRN_TRUSTED_PROXIES=N (N reverse proxies in front of Cairn, each
    appending to X-Forwarded-For) the N-th address from the right of X-Forwarded-For: the one
    the outermost trusted proxy saw. Addresses further left are whatever the client claimed."""
    meta = request.META
    remote = _valid_ip(meta.get("REMOTE_ADDR"))
    proxies = int(settings.CAIRN.get("TRUSTED_PROXIES", 0) or 0)
    if proxies > 0:
        hops = [hop.strip() for hop in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
        if len(hops) >= proxies:
            return _valid_ip(hops[-proxies]) or remote
    return remote


def user_agent(request: HttpRequest) -> str:
    text = str(request.META.get("HTTP_USER_AGENT", ""))
    return text.replace("\x00", "")[:USER_AGENT_MAX]
