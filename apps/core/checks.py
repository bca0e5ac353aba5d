"""System checks about secrets (issue 44): the key Cairn signs and encrypts with, and whether
PostgreSQL and Redis let anyone in.

- cairn.E001 (always): server mode with the public default SECRET_KEY. Sessions, the key of
  stored credentials and the notebook token on Kubernetes derive from it: anyone who read the
  source could forge or read them. Every management command stops on it, and so does the web
  server (`check_at_start`, called by config/asgi.py).
- cairn.W001 / cairn.W002 (`check --deploy`, and logged at the web server's start): the database
  URL or the Redis URL has no password and a connection without one succeeds. A workload that
  reaches them (any process on the host, if they listen there) could rewrite the database or
  enqueue tasks; docs/operations.md says both need passwords.
- cairn.W003 (likewise): uvicorn's FORWARDED_ALLOW_IPS is not CAIRN_FORWARDED_ALLOW_IPS.

After each migrate, credentials that the public default key encrypted are re-encrypted with the
current key: apps/clusters/crypto.py `rotate_legacy` (core may not import the apps that hold them)."""
from __future__ import annotations

import logging
import os

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from config.secret_key import DEFAULT_SECRET_KEY

from .proxyheaders import forwarded_allow_ips

logger = logging.getLogger(__name__)

TIMEOUT = 2  # seconds per connection attempt


def _secret_key_errors() -> list[checks.CheckMessage]:
    if settings.CAIRN_MODE == "server" and settings.SECRET_KEY == DEFAULT_SECRET_KEY:
        return [checks.Error(
            "SECRET_KEY is Cairn's public default, which server mode refuses: sessions, stored credentials "
            "and notebook tokens would be forgeable by anyone who read the source.",
            hint="Set SECRET_KEY to a long random string in the environment or .env, e.g. "
                 "`python3 -c 'import secrets; print(secrets.token_urlsafe(50))'`, and keep it.",
            id="cairn.E001")]
    return []


@checks.register()
def secret_key(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return _secret_key_errors()


def postgres_without_password() -> str | None:
    """A message when the database URL has no password and PostgreSQL lets us in without one."""
    db = settings.DATABASES["default"]
    if "postgresql" not in db.get("ENGINE", "") or db.get("PASSWORD") or os.environ.get("PGPASSWORD"):
        return None
    import psycopg

    params = {"dbname": db.get("NAME") or "postgres", "user": db.get("USER") or None,
              "host": db.get("HOST") or None, "port": str(db.get("PORT") or "") or None,
              # No ~/.pgpass: a connection without any password.
              "connect_timeout": TIMEOUT, "passfile": "/nonexistent/cairn-no-passfile"}
    try:
        psycopg.connect(**{k: v for k, v in params.items() if v is not None}).close()
    except psycopg.OperationalError as exc:
        # PostgreSQL looks the database up after authentication: "does not exist" means it let us in.
        if "database" not in str(exc) or "does not exist" not in str(exc):
            return None
    except Exception:  # noqa: BLE001 - refused, unreachable, or a password asked for: nothing to say
        return None
    where = f"{db.get('HOST') or 'its unix socket'}:{db.get('PORT') or 5432}"
    return (f"PostgreSQL at {where} accepts Cairn's user '{db.get('USER')}' without a password (DATABASE_URL has "
            f"none): any process that reaches it can rewrite Cairn's database.")


def redis_without_password() -> str | None:
    """A message when REDIS_URL has no password and Redis answers PING without AUTH."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)
    except ValueError:
        return None
    if client.connection_pool.connection_kwargs.get("password"):
        client.close()
        return None
    try:
        answered = client.ping()
    except Exception:  # noqa: BLE001 - refused, unreachable, or NOAUTH: nothing to say
        answered = False
    finally:
        client.close()
    if not answered:
        return None
    return ("Redis at REDIS_URL answers without a password: any process that reaches it can enqueue tasks for "
            "Cairn's worker and publish on live topics.")


def uvicorn_forwarded_mismatch() -> str | None:
    """Server mode runs `uvicorn` from the command line, which reads FORWARDED_ALLOW_IPS and
    otherwise believes X-Forwarded-For from 127.0.0.1: a message when that differs from
    CAIRN_FORWARDED_ALLOW_IPS (docker-compose and the Kubernetes config set both)."""
    if settings.CAIRN_MODE != "server":
        return None
    theirs = os.environ.get("FORWARDED_ALLOW_IPS")
    ours = forwarded_allow_ips()
    if theirs is not None and sorted(p.strip() for p in theirs.split(",") if p.strip()) == sorted(ours):
        return None
    return (f"uvicorn believes X-Forwarded-For from {theirs if theirs is not None else '127.0.0.1 (its default)'}, "
            f"Cairn from {','.join(ours) or 'no one'}: a process on the web server's machine could forge its "
            f"address for the sign-in throttle. Set FORWARDED_ALLOW_IPS='{','.join(ours)}' for uvicorn.")


PASSWORD_HINT = ("Give it a password (PostgreSQL: md5 or scram-sha-256 in pg_hba.conf; Redis: requirepass) and put "
                 "it in the URL; docs/operations.md, Passwords.")


@checks.register(deploy=True)
def services_without_password(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    found = []
    for check_id, message in (("cairn.W001", postgres_without_password()), ("cairn.W002", redis_without_password())):
        if message:
            found.append(checks.Warning(message, hint=PASSWORD_HINT, id=check_id))
    mismatch = uvicorn_forwarded_mismatch()
    if mismatch:
        found.append(checks.Warning(mismatch, hint="docs/permissions.md, Audit log.", id="cairn.W003"))
    return found


def check_at_start() -> None:
    """What the web server checks as it loads (uvicorn runs no system checks): the key, and the
    passwords, logged as warnings."""
    errors = _secret_key_errors()
    if errors:
        raise ImproperlyConfigured(f"{errors[0].msg} {errors[0].hint}")
    if settings.CAIRN_MODE != "server":
        return
    for message in (postgres_without_password(), redis_without_password()):
        if message:
            logger.warning("%s %s", message, PASSWORD_HINT)
    mismatch = uvicorn_forwarded_mismatch()
    if mismatch:
        logger.warning("%s", mismatch)
