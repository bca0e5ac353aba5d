"""Per-token rate limit of ingestion requests (429 above it): a fixed one-second window in the
Django cache. With the default local-memory cache the count is per server process; point
CACHES at Redis to share it between processes."""
import time

from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

from apps.accounts.models import ApiToken

from .conf import setting
from .models import RunToken


def _identity(request) -> str:
    auth = request.auth
    if isinstance(auth, RunToken):
        return run_token_identity(auth.prefix)
    if isinstance(auth, ApiToken):
        return f"api:{auth.prefix}"
    return f"user:{request.user.pk}"


def run_token_identity(prefix: str) -> str:
    return f"run:{prefix}"


def ingest_wait(identity: str) -> float | None:
    """Count one request of `identity`: None when it is allowed, else the seconds to wait."""
    rate = setting("TRACKING_INGEST_RATE_PER_SECOND")
    if not rate:
        return None
    now = time.time()
    window = int(now)
    key = f"cairn:ingest-rate:{identity}:{window}"
    if cache.add(key, 1, timeout=5):
        count = 1
    else:
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=5)
            count = 1
    return None if count <= rate else max(window + 1 - now, 0.001)


class IngestRateThrottle(BaseThrottle):
    def allow_request(self, request, view):
        self._wait = ingest_wait(_identity(request))
        return self._wait is None

    def wait(self):
        return self._wait
