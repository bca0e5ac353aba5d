"""Gateway limits (override any of them in settings.CAIRN, e.g. CAIRN["SERVE_TIMEOUT_SECONDS"]), and the
default container port of a deployment."""
from django.conf import settings

# A deployment's container port when its spec names none (never Cairn's own 8000). The process
# gets it as $PORT; the local backend instead picks a free port and passes that as $PORT.
# Here, not in the Kubernetes backend that uses it, because the deployments API states it too.
DEPLOYMENT_PORT = 8080

DEFAULTS = {
    # A replica must start answering (status line and headers) within this many seconds, else 504.
    # The body may then take as long as it needs (streams, server-sent events).
    "SERVE_TIMEOUT_SECONDS": 60.0,
    # Connecting to a replica (its unix socket or TCP port) may take this long before it counts as failed.
    "SERVE_CONNECT_TIMEOUT_SECONDS": 5.0,
}


def setting(name: str):
    return settings.CAIRN.get(name, DEFAULTS[name])
