"""Keep credentials out of logs. Servers log request paths with their query strings (uvicorn:
`"WebSocket /ws/...?token=..." [accepted]`, `"GET /api/...?token=... HTTP/1.1" 200`); a token
there would be readable by anyone who reads the logs. RedactSecrets replaces the value of any
`token`-like query parameter and anything shaped like a Cairn API token in a record's message.

Installed on the server's own loggers by config/asgi.py (install) and on Django's console handler
by LOGGING (config/settings/base.py). No Django imports: logging is configured before apps load."""
import logging
import re

_QUERY_SECRET = re.compile(r"(?i)([?&;](?:token|access_token|api_token|ticket)=)[^&;\s\"']*")
_API_TOKEN = re.compile(r"cairn_[0-9a-f]{6,}_[A-Za-z0-9_\-]+")
REDACTED = "[redacted]"

SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access", "daphne.server", "daphne.http_protocol", "daphne.ws_protocol")


def redact(text: str) -> str:
    return _API_TOKEN.sub(f"cairn_{REDACTED}", _QUERY_SECRET.sub(rf"\1{REDACTED}", text))


def _redact_arg(value):
    return redact(value) if isinstance(value, str) else value


class RedactSecrets(logging.Filter):
    """Blanks secrets in the record's arguments one by one, keeping the record's shape: uvicorn's
    AccessFormatter unpacks `args` as (client, method, path, version, status), so a record whose
    args were folded into the message lost its line and printed a traceback. Only when a secret
    survives that (one split across arguments) is the message folded into `msg`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging module's business, not ours
            return True
        if redact(message) == message:
            return True
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact_arg(v) for k, v in record.args.items()}
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        try:
            again = record.getMessage()
        except Exception:
            again = None
        if again is None or redact(again) != again:
            record.msg, record.args = redact(message), None
        return True


def install() -> None:
    """Add the filter to the ASGI servers' loggers (idempotent)."""
    for name in SERVER_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in log.filters):
            log.addFilter(RedactSecrets())
