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
    # The readiness GET of a replica must answer within this many seconds to count as ready.
    "SERVE_PROBE_TIMEOUT_SECONDS": 1.0,
    # Larger request bodies are refused with 413 (Content-Length, or counted while streaming).
    "SERVE_MAX_BODY_BYTES": 64 * 1024 * 1024,
    # A request is tried on at most this many replicas when connections fail before any answer.
    "SERVE_MAX_TRIES": 3,
    # Request metrics (rates, in flight, latency quantiles) are stored with the telemetry this often.
    "SERVE_METRICS_INTERVAL_SECONDS": 2.0,
    # Scale to zero: a request waits at most this long for a replica to start and be ready (then 503),
    # and at most this many requests wait per server process (more: 503 at once).
    "SERVE_COLD_START_SECONDS": 60.0,
    "SERVE_HOLD_QUEUE": 100,
    # A granted call's decision (credentials checked, ready replicas) is reused this long per process.
    "SERVE_AUTH_CACHE_SECONDS": 1.0,
}


def setting(name: str):
    return settings.CAIRN.get(name, DEFAULTS[name])
