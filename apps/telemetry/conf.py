"""Telemetry knobs; override any in settings.CAIRN."""
from django.conf import settings

DEFAULTS = {
    "TELEMETRY_INTERVAL": 10.0,  # seconds between local samples / DCGM scrapes
    "TELEMETRY_RAW_RETENTION_HOURS": 24,  # raw samples, then 1-minute rollups
    "TELEMETRY_MINUTE_RETENTION_DAYS": 7,  # 1-minute rollups, then 1-hour rollups
    "TELEMETRY_HOUR_RETENTION_DAYS": 90,  # 1-hour rollups, then deleted
    # DCGM exporter per node of Kubernetes clusters, e.g. "http://{node}:9400/metrics" ("" = off).
    "TELEMETRY_DCGM_URL_TEMPLATE": "",
    # The other vendors' exporters, per accelerator type, e.g. {"amd": "http://{node}:5000/metrics",
    # "ascend": "http://{node}:8082/metrics"} (a type missing: not scraped; nvidia: the DCGM template).
    "TELEMETRY_EXPORTER_URL_TEMPLATES": {},
    "TELEMETRY_SCRAPE_TIMEOUT": 5.0,
    # Live publication: at most one batch per node per this many seconds goes to the dashboard.
    "TELEMETRY_PUBLISH_MIN_INTERVAL": 1.0,
    # The cluster overview shows a GPU's latest sample only if it is at most this old (seconds).
    "TELEMETRY_LATEST_MAX_AGE": 120,
    # GPU faults: XID codes caused by applications (not the hardware), which do not cordon a node:
    # 13 graphics engine exception, 31 MMU fault, 43 user channel stopped, 45 preemptive cleanup.
    "TELEMETRY_XID_IGNORED": [13, 31, 43, 45],
    "TELEMETRY_FAULT_CORDON": True,  # cordon (and mark unhealthy) nodes whose GPUs report faults
    # /metrics: who may read it besides staff users: clients in these networks, or this bearer token.
    "METRICS_ALLOWED_NETWORKS": [],
    "METRICS_TOKEN": "",
}


def setting(name: str):
    return settings.CAIRN.get(name, DEFAULTS[name])
