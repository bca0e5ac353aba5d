"""Telemetry knobs; override any in settings.CAIRN."""
from django.conf import settings

DEFAULTS = {
    "TELEMETRY_INTERVAL": 10.0,  # seconds between local samples / DCGM scrapes
    "TELEMETRY_RAW_RETENTION_HOURS": 24,  # raw samples, then 1-minute rollups
    "TELEMETRY_MINUTE_RETENTION_DAYS": 7,  # 1-minute rollups, then 1-hour rollups
    "TELEMETRY_HOUR_RETENTION_DAYS": 90,  # 1-hour rollups, then deleted
    # DCGM exporter per node of Kubernetes clusters, e.g. "http://{node}:9400/metrics" ("" = off).
    "TELEMETRY_DCGM_URL_TEMPLATE": "",
    "TELEMETRY_SCRAPE_TIMEOUT": 5.0,
    # /metrics: who may read it besides staff users: clients in these networks, or this bearer token.
    "METRICS_ALLOWED_NETWORKS": [],
    "METRICS_TOKEN": "",
}


def setting(name: str):
    return settings.CAIRN.get(name, DEFAULTS[name])
