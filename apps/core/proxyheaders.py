"""Which peers' X-Forwarded-For Cairn believes: CAIRN_FORWARDED_ALLOW_IPS (addresses or networks;
"*": any), none by default. Used where Cairn starts uvicorn (uvicorn_proxy_options), by the audit
log's and the sign-in throttle's client address (apps/audit/context.py), and by the system check
that compares it with uvicorn's own FORWARDED_ALLOW_IPS (apps/core/checks.py)."""
import ipaddress

from django.conf import settings


def forwarded_allow_ips() -> list[str]:
    value = settings.CAIRN.get("FORWARDED_ALLOW_IPS") or []
    return [value] if isinstance(value, str) else [str(v).strip() for v in value if str(v).strip()]


def uvicorn_proxy_options() -> dict:
    """uvicorn.Config's proxy arguments for Cairn's setting. uvicorn's own default trusts
    X-Forwarded-For from 127.0.0.1, where every local job is too: a job forged its address."""
    allowed = forwarded_allow_ips()
    return {"proxy_headers": bool(allowed), "forwarded_allow_ips": ",".join(allowed) if allowed else ""}


def is_trusted(ip: str, allowed: list[str]) -> bool:
    address = ipaddress.ip_address(ip)
    for entry in allowed:
        if entry == "*":
            return True
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False
