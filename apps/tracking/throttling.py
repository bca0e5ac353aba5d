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
        return f"run:{auth.prefix}"
    if isinstance(auth, ApiToken):
        return f"api:{auth.prefix}"
    return f"user:{request.user.pk}"


class IngestRateThrottle(BaseThrottle):
    def allow_request(self, request, view):
        rate = setting("TRACKING_INGEST_RATE_PER_SECOND")
        if not rate:
            return True
        now = time.time()
        window = int(now)
        key = f"cairn:ingest-rate:{_identity(request)}:{window}"
        if cache.add(key, 1, timeout=5):
            count = 1
        else:
            try:
                count = cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.add(key, 1, timeout=5)
                count = 1
        self._wait = window + 1 - now
        return count <= rate

    def wait(self):
        return max(self._wait, 0.001)
