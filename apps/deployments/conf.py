"""Gateway limits. Override any of them in settings.CAIRN (e.g. CAIRN["SERVE_TIMEOUT_SECONDS"])."""
from django.conf import settings

DEFAULTS = {
    # A replica must start answering (status line and headers) within this many seconds, else 504.
    # The body may then take as long as it needs (streams, server-sent events).
    "SERVE_TIMEOUT_SECONDS": 60.0,
    # Connecting to a replica (its unix socket or TCP port) may take this long before it counts as failed.
    "SERVE_CONNECT_TIMEOUT_SECONDS": 5.0,
}


def setting(name: str):
    return settings.CAIRN.get(name, DEFAULTS[name])
