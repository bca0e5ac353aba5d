"""Settings of the Cairn server that bench/tracking_bench.py starts: Cairn's own, with the
per-token ingestion rate limit raised from 50 to 1,000 requests per second. At 50 requests/s
a run token may send 50,000 points/s in 1,000-point batches, which one benchmark writer
exceeds; MLflow has no such limit. Everything else is as shipped."""
from config.settings import *  # noqa: F403
from config.settings import CAIRN

CAIRN = {**CAIRN, "TRACKING_INGEST_RATE_PER_SECOND": 1000}
