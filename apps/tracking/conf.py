"""Tracking limits. Override any of them in settings.CAIRN (e.g. CAIRN["TRACKING_INGEST_RATE"])."""
from django.conf import settings

DEFAULTS = {
    # Ingestion request bodies above this answer 413 (its own limit: batches are bigger than specs).
    "TRACKING_INGEST_MAX_BYTES": 4 * 1024 * 1024,
    "TRACKING_MAX_POINTS_PER_BATCH": 20_000,
    "TRACKING_MAX_KEYS_PER_BATCH": 1_000,
    "TRACKING_MAX_PARAMS_PER_BATCH": 1_000,
    "TRACKING_PARAM_VALUE_MAX_LENGTH": 5_000,
    # Ingestion requests per token (run token or API token) per second; above it, 429.
    "TRACKING_INGEST_RATE_PER_SECOND": 50,
    # Run tokens checked by the ingestion fast path are cached per process this long (their hash, run
    # and project); revocation and the run's status are checked again by every ingest statement.
    "TRACKING_RUN_TOKEN_CACHE_SECONDS": 30,
    # Long-lived threads per server process that run tracking's database work under ASGI (so that
    # their connections persist); 0 runs it in each request's own thread, as Django does.
    "TRACKING_DB_THREADS": 4,
    # Full-resolution reads: points per page.
    "TRACKING_PAGE_MAX": 10_000,
    # Live websockets: frames per second per subscription, and points buffered per subscription
    # while a client is slow (older ones are dropped and the frame says how many).
    "TRACKING_LIVE_MAX_FPS": 10,
    # ... of which this many may be sent back to back after a quieter spell (see consumers.py).
    "TRACKING_LIVE_BURST_FRAMES": 2,
    "TRACKING_LIVE_BUFFER_POINTS": 10_000,
    # Under the ASGI server, the latest values sent to project-wide subscribers are gathered for
    # this long (seconds) into one event per project (see services.points_publish).
    "TRACKING_LIVE_PROJECT_WINDOW": 0.05,
    # Batch ids (for acknowledging retried batches without storing them twice) are kept this long;
    # a finished run's are dropped at once (it accepts no more data). SDK retries take seconds.
    "TRACKING_BATCH_ID_RETENTION_HOURS": 24,
}


def setting(name: str):
    return settings.CAIRN.get(name, DEFAULTS[name])
