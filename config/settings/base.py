"""Cairn settings, driven by environment variables (django-environ).

CAIRN_MODE=embedded (default) needs no external service: SQLite, in-process tasks,
in-memory channel layer. CAIRN_MODE=server expects DATABASE_URL and REDIS_URL.
"""
from pathlib import Path

import environ

from apps.scheduling.policy import (
    DEFAULT_GPU_NODE_RESERVE,
    DEFAULT_REPREEMPT_MIN_RUNTIME,
    DEFAULT_SERVICE_HALF_LIFE,
    DEFAULT_STARVATION_SECONDS,
    DEFAULT_TIMESLICE_SECONDS,
)
from config.secret_key import DEFAULT_SECRET_KEY, embedded_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
env_file = BASE_DIR / ".env"
if env_file.exists():
    environ.Env.read_env(str(env_file))

CAIRN_MODE = env.str("CAIRN_MODE", default="embedded")
if CAIRN_MODE not in ("embedded", "server"):
    raise environ.ImproperlyConfigured("CAIRN_MODE must be 'embedded' or 'server'")
EMBEDDED = CAIRN_MODE == "embedded"

# Where Cairn keeps its own files: the SQLite database in embedded mode, replica logs, pid files.
CAIRN_DATA_DIR = Path(env.str("CAIRN_DATA_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)
# Server mode: SECRET_KEY from the environment (the public default is refused: system check
# cairn.E001). Embedded mode without one: a random key made on the first run and kept in the data
# folder (config/secret_key.py).
SECRET_KEY = env.str("SECRET_KEY", default="") or (
    embedded_secret_key(CAIRN_DATA_DIR) if EMBEDDED else DEFAULT_SECRET_KEY)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served by Cairn: the API docs work offline
    "channels",
    "apps.core",
    "apps.accounts",
    "apps.projects",
    "apps.clusters",
    "apps.quotas",
    "apps.storage",
    "apps.scheduling",
    "apps.workloads",
    "apps.training",
    "apps.notebooks",
    "apps.deployments",
    "apps.backends",
    "apps.tracking",
    "apps.telemetry",
    "apps.sweeps",  # hyper-parameter sweeps: trials are training workloads, objectives from tracking
    "apps.audit",
    "apps.portal",  # the composition root: API root, websocket hub, run_embedded, seed_demo
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "apps.core.middleware.RejectControlCharactersMiddleware",
    "apps.core.staticfiles.StaticFilesMiddleware",  # WhiteNoise, with async file bodies for ASGI
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "apps.audit.context.AuditRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "/admin/login/"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_default_db = f"sqlite:///{CAIRN_DATA_DIR / 'cairn.sqlite3'}" if EMBEDDED else None
DATABASES = {"default": env.db("DATABASE_URL", default=_default_db)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads (web, scheduler, reconciler) share the file in embedded mode:
    # WAL plus immediate transactions avoid "database is locked" on lock upgrades.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="" if EMBEDDED else "redis://127.0.0.1:6379/0")

if REDIS_URL:
    # Redis pub/sub: one PUBLISH per group message, pushed to the subscribed processes (the core
    # layer costs several round trips per group_send and two per message received). Messages
    # are not buffered for receivers that are not subscribed at that moment; realtime here is
    # best effort and the database is the truth.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 2, "max_retries": 1}
CELERY_TASK_DEFAULT_QUEUE = "cairn"
# In embedded mode the outbox relay calls task functions in-process instead of publishing.
CAIRN_TASKS_IN_PROCESS = env.bool("CAIRN_TASKS_IN_PROCESS", default=EMBEDDED)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# collectstatic fills it in server mode; it must exist before, or WhiteNoise warns at every start.
try:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
except OSError:  # a read-only checkout: WhiteNoise's warning then says what is missing
    pass
FRONTEND_DIST = BASE_DIR / "frontend" / "dist"
STATICFILES_DIRS = [FRONTEND_DIST] if FRONTEND_DIST.exists() else []
# Embedded mode serves static files straight from the app and frontend folders.
WHITENOISE_USE_FINDERS = EMBEDDED or DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Request bodies bigger than this answer 413 (workload specs are small).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2 * 1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apps.accounts.permissions.TokenScopePermission",
    ],
    "DEFAULT_PARSER_CLASSES": ["apps.core.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "apps.core.pagination.DefaultPagination",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "apps.core.schema.AutoSchema",  # documents the error answers too
    "EXCEPTION_HANDLER": "apps.core.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_RATES": {"login": "20/min"},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Cairn API",
    "DESCRIPTION": "Projects, resource pools, quotas and workloads (training jobs, notebooks, deployments) on GPU clusters.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The live websocket's frames as components (LiveFrame & co.), after the enums are named.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "apps.portal.frames.live_frames_schema_hook"],
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStatusEnum": "apps.workloads.choices.WorkloadStatus",
        "RoleEnum": "apps.projects.choices.Role",
        "RunStatusEnum": "apps.tracking.choices.RunStatus",
        "AcceleratorTypeEnum": "apps.clusters.choices.AcceleratorType",
        "AcceleratorVendorEnum": "apps.workloads.api.accelerators.VENDOR_CHOICES",
        "DatasetSourceEnum": "apps.storage.choices.SourceKind",
    },
}

# The execution backends, one package each (apps/backends/<name>/: its SPEC, BACKEND and RECONCILER;
# apps/backends/base.py, "registration"). A cluster's `backend` names one of them.
CAIRN_BACKENDS = [
    "apps.backends.local",
    "apps.backends.kubernetes",
    "apps.backends.slurm",
]

# Cairn's own knobs. The scheduler's defaults come from its policy core (pure Python, no Django),
# so that the service, `manage.py simulate` and the benchmarks agree; apps/scheduling/checks.py
# refuses values out of range at startup.
# Check every frame the live websocket sends against its declaration (apps/portal/frames.py);
# the tests turn it on (tests/conftest.py).
CAIRN_VALIDATE_LIVE_FRAMES = env.bool("CAIRN_VALIDATE_LIVE_FRAMES", default=False)

CAIRN = {
    # Local backend: seconds between SIGTERM and SIGKILL when a replica is stopped.
    "STOP_GRACE_SECONDS": env.float("CAIRN_STOP_GRACE_SECONDS", default=10.0),
    # Self-healing restarts (docs/training.md): attempt n+1 starts this long after every rank of
    # attempt n is gone, doubling with each restart, capped.
    "RESTART_BACKOFF_SECONDS": env.float("CAIRN_RESTART_BACKOFF_SECONDS", default=1.0),
    "RESTART_BACKOFF_MAX_SECONDS": env.float("CAIRN_RESTART_BACKOFF_MAX_SECONDS", default=300.0),
    # A workload preempted once is not reclaimed again before it has run this long (anti-thrash).
    "REPREEMPT_MIN_RUNTIME_SECONDS": env.float("CAIRN_REPREEMPT_MIN_RUNTIME_SECONDS", default=DEFAULT_REPREEMPT_MIN_RUNTIME),
    # Bounded wait: pending this long, a workload goes before newer work of any priority (0: off).
    "STARVATION_SECONDS": env.float("CAIRN_STARVATION_SECONDS", default=DEFAULT_STARVATION_SECONDS),
    # Time slice: past the bounded wait, multi-GPU work may preempt its own project's work of the same
    # priority that has run this long since its admission (0: off). docs/scheduling.md, Time slice.
    "TIMESLICE_SECONDS": env.float("CAIRN_TIMESLICE_SECONDS", default=DEFAULT_TIMESLICE_SECONDS),
    # Past the bounded wait, the project served worst (GPU-time held over GPU-time in the system)
    # goes first; both count the past with this half-life (apps.scheduling.services.project_service).
    "SERVICE_HALF_LIFE_SECONDS": env.float("CAIRN_SERVICE_HALF_LIFE_SECONDS", default=DEFAULT_SERVICE_HALF_LIFE),
    # GPU nodes keep this share of their free GPUs' part of the node's CPU and memory for GPU work
    # (0: CPU-only work may take all of it; 1: all of it is kept). docs/scheduling.md, Placement.
    "GPU_NODE_RESERVE": env.float("CAIRN_GPU_NODE_RESERVE", default=DEFAULT_GPU_NODE_RESERVE),
    # A pending reason's figures (free capacity, a project's usage) are rewritten once older than
    # this; its kind and class at once (apps.scheduling.services._apply_waits; 0: every change).
    "WAIT_REFRESH_SECONDS": env.float("CAIRN_WAIT_REFRESH_SECONDS", default=30.0),
    # Loop intervals of the long-running processes (scheduler, reconciler, outbox relay).
    "SCHEDULER_INTERVAL": env.float("CAIRN_SCHEDULER_INTERVAL", default=1.0),
    "RECONCILER_INTERVAL": env.float("CAIRN_RECONCILER_INTERVAL", default=1.0),
    "OUTBOX_INTERVAL": env.float("CAIRN_OUTBOX_INTERVAL", default=1.0),
    # The sweep driver (apps/sweeps/driver.py): seconds between passes, and how long a driver's
    # claim on a sweep lasts without renewal (another driver takes over a dead one's after that).
    "SWEEP_INTERVAL": env.float("CAIRN_SWEEP_INTERVAL", default=2.0),
    "SWEEP_LEASE_SECONDS": env.float("CAIRN_SWEEP_LEASE_SECONDS", default=30.0),
    # run_embedded runs the driver in a thread unless this is off (then `manage.py run_sweeps` does).
    "SWEEP_DRIVER_EMBEDDED": env.bool("CAIRN_SWEEP_DRIVER_EMBEDDED", default=True),
    # Address that replicas use to reach the API (injected as CAIRN_API_URL).
    "PUBLIC_URL": env.str("CAIRN_PUBLIC_URL", default="http://127.0.0.1:8000"),
    "LOCAL_CLUSTER_NAME": env.str("CAIRN_LOCAL_CLUSTER", default="local"),
    "LOCAL_POOL_NAME": env.str("CAIRN_LOCAL_POOL", default="local"),
    "TOKEN_DEFAULT_DAYS": env.int("CAIRN_TOKEN_DEFAULT_DAYS", default=90),
    # Local backend isolation (docs/local-backend.md): "auto" sandboxes replicas with bubblewrap
    # and, when Cairn runs as root, runs them as RUN_USER; "off" runs them as Cairn's own user.
    "SANDBOX": env.str("CAIRN_SANDBOX", default="auto"),
    "RUN_USER": env.str("CAIRN_RUN_USER", default="cairn-run"),
    # Limits of a local replica (docs/local-backend.md, "Limits"). Memory: its request, for all its
    # processes together (cgroup v2 where delegated, else a watchdog). /tmp and /dev/shm are tmpfs
    # of these sizes in MiB (0: the memory limit for /tmp, half of it for /dev/shm). Processes: at
    # most PROCESS_LIMIT per replica (watchdog); RLIMIT_NPROC of replicas is NPROC_LIMIT, which
    # the kernel counts per user (every replica of the run user together, threads included).
    # Disk: the workload's work, home and checkpoint folders together, in GiB (0: no limit).
    "TMP_SIZE_MB": env.int("CAIRN_TMP_SIZE_MB", default=0),
    "SHM_SIZE_MB": env.int("CAIRN_SHM_SIZE_MB", default=0),
    "PROCESS_LIMIT": env.int("CAIRN_PROCESS_LIMIT", default=1024),
    "NPROC_LIMIT": env.int("CAIRN_NPROC_LIMIT", default=16384),
    "DISK_LIMIT_GB": env.float("CAIRN_DISK_LIMIT_GB", default=100.0),
    # A cgroup v2 folder delegated to Cairn whose subtree_control enables memory ("": found alone
    # when Cairn's own cgroup or its parent is such a folder; "off": always the watchdog).
    "CGROUP_PARENT": env.str("CAIRN_CGROUP_PARENT", default=""),
    # Seccomp filter in the bubblewrap sandbox (refuses unshare, mount, ptrace, keyctl, ...): on | off.
    "SECCOMP": env.str("CAIRN_SECCOMP", default="on"),
    # Hosts (name, IP or host:port) that URLs Cairn fetches for users (S3 dataset endpoints) may
    # point at although they resolve to loopback/private addresses, for every pool; pools add
    # their own (ResourcePool.fetch_allowed_hosts). apps/core/netguard.py.
    "FETCH_ALLOWED_HOSTS": env.list("CAIRN_FETCH_ALLOWED_HOSTS", default=[]),
    # Addresses or networks (comma-separated; "*": any) of the reverse proxies whose
    # X-Forwarded-For is believed, by uvicorn where Cairn starts it and by the audit log and the
    # sign-in throttle. Empty (default): none, the TCP peer's address is the client's.
    "FORWARDED_ALLOW_IPS": env.list("CAIRN_FORWARDED_ALLOW_IPS", default=[]),
    # How many of those proxies append to X-Forwarded-For (audit log addresses); 0: count the
    # trusted ones from the right instead.
    "TRUSTED_PROXIES": env.int("CAIRN_TRUSTED_PROXIES", default=0),
    # Telemetry (apps/telemetry/conf.py has the rest): seconds between samples, and the DCGM
    # exporter of each Kubernetes node, e.g. "http://{node}:9400/metrics" ("" = no scrape).
    "TELEMETRY_INTERVAL": env.float("CAIRN_TELEMETRY_INTERVAL", default=10.0),
    "TELEMETRY_DCGM_URL_TEMPLATE": env.str("CAIRN_TELEMETRY_DCGM_URL_TEMPLATE", default=""),
    # Notebooks (docs/notebooks.md): the idle culler's interval (seconds), the GPU utilisation (%)
    # under which a notebook's GPUs count as idle, and where `make code-server` installs VS Code.
    "NOTEBOOK_CULL_INTERVAL": env.float("CAIRN_NOTEBOOK_CULL_INTERVAL", default=30.0),
    "NOTEBOOK_GPU_IDLE_PERCENT": env.float("CAIRN_NOTEBOOK_GPU_IDLE_PERCENT", default=5.0),
    # The address local notebooks listen on and Cairn's proxy reaches them at: loopback, unless
    # the web process runs elsewhere (docker-compose: the worker's name on the compose network).
    "NOTEBOOK_BIND_HOST": env.str("CAIRN_NOTEBOOK_BIND_HOST", default="127.0.0.1"),
    "CODE_SERVER": env.str("CAIRN_CODE_SERVER",
                           default=str(BASE_DIR / ".cache" / "code-server" / "node_modules" / ".bin" / "code-server")),
    # Storage (docs/data.md): GiB of volumes a project may declare unless an admin sets its own
    # StorageQuota; the node-local dataset cache's folder (default <data dir>/cache/datasets) and size.
    "VOLUME_QUOTA_GB": env.int("CAIRN_VOLUME_QUOTA_GB", default=100),
    "ARTIFACTS_VOLUME_GB": env.int("CAIRN_ARTIFACTS_VOLUME_GB", default=20),
    "MODEL_MAX_BYTES": env.int("CAIRN_MODEL_MAX_BYTES", default=10 * 1024**3),  # one model version, unpacked
    "DATASET_CACHE_DIR": env.str("CAIRN_DATASET_CACHE_DIR", default=""),
    "DATASET_CACHE_GB": env.float("CAIRN_DATASET_CACHE_GB", default=50.0),
    # Assumed download rate of a cache fill, MB/s: how long pending work with uncached datasets
    # is expected to take to start (its reason and estimated start).
    "DATASET_FILL_MBPS": env.float("CAIRN_DATASET_FILL_MBPS", default=200.0),
}

# Kubernetes backend (apps/backends/kubernetes, docs/kubernetes.md). Per-cluster choices (Volcano,
# Kueue queue, namespace prefix, tolerations, images) live in Cluster.config and override these.
CAIRN_KUBERNETES = {
    # Whole GPUs are requested as this extended resource.
    "GPU_RESOURCE": env.str("CAIRN_K8S_GPU_RESOURCE", default="nvidia.com/gpu"),
    # Fractional GPUs (gpu < 1): resource name -> "one" (1), "percent" (of one GPU) or "milli".
    # HAMi: nvidia.com/gpu=one,nvidia.com/gpucores=percent,nvidia.com/gpumem-percentage=percent
    "SHARED_GPU_RESOURCES": env.dict("CAIRN_K8S_SHARED_GPU_RESOURCES", default={"nvidia.com/gpu": "one"}),
    "GPU_PRODUCT_LABEL": env.str("CAIRN_K8S_GPU_PRODUCT_LABEL", default="nvidia.com/gpu.product"),
    "NAMESPACE_PREFIX": env.str("CAIRN_K8S_NAMESPACE_PREFIX", default="cairn-"),
    "DEFAULT_IMAGE": env.str("CAIRN_K8S_DEFAULT_IMAGE", default="python:3.12-slim"),
    # JupyterLab notebooks run a public image; VS Code ones need code-server in theirs:
    # platform/images/notebook/Dockerfile, which the admin builds and pushes (docs/notebooks.md).
    "NOTEBOOK_IMAGE": env.str("CAIRN_K8S_NOTEBOOK_IMAGE", default="quay.io/jupyter/base-notebook:latest"),
    "VSCODE_NOTEBOOK_IMAGE": env.str("CAIRN_K8S_VSCODE_NOTEBOOK_IMAGE", default="cairn-notebook:4.100.3"),
    "NOTEBOOK_STORAGE": env.str("CAIRN_K8S_NOTEBOOK_STORAGE", default="10Gi"),
    # How the notebook proxy reaches notebooks: auto | dns | apiserver (docs/kubernetes.md, "Notebooks").
    "NOTEBOOK_ROUTE": env.str("CAIRN_K8S_NOTEBOOK_ROUTE", default="auto"),
    # Address replicas use to reach Cairn's API from inside the cluster (CAIRN_API_URL).
    "API_URL": env.str("CAIRN_K8S_API_URL", default=""),
    # Client: seconds per request, retries with exponential backoff on 5xx / 429 / timeouts.
    "CONNECT_TIMEOUT": env.float("CAIRN_K8S_CONNECT_TIMEOUT", default=5.0),
    "REQUEST_TIMEOUT": env.float("CAIRN_K8S_REQUEST_TIMEOUT", default=15.0),
    "RETRIES": env.int("CAIRN_K8S_RETRIES", default=3),
    "RETRY_BACKOFF": env.float("CAIRN_K8S_RETRY_BACKOFF", default=0.5),
    "RETRY_BACKOFF_MAX": env.float("CAIRN_K8S_RETRY_BACKOFF_MAX", default=8.0),
    # Reconciler (docs/kubernetes.md, "The reconciler at scale"): server-side watch timeout; a full
    # pass over every workload from the caches every RESYNC_SECONDS (between them, what changed);
    # every informer lists everything again every RELIST_SECONDS, PAGE_SIZE objects a request; a
    # running training job's health every HEALTH_CHECK_SECONDS.
    "WATCH_TIMEOUT": env.int("CAIRN_K8S_WATCH_TIMEOUT", default=60),
    "RESYNC_SECONDS": env.float("CAIRN_K8S_RESYNC_SECONDS", default=300.0),
    "RELIST_SECONDS": env.float("CAIRN_K8S_RELIST_SECONDS", default=1800.0),
    "PAGE_SIZE": env.int("CAIRN_K8S_PAGE_SIZE", default=500),
    "HEALTH_CHECK_SECONDS": env.float("CAIRN_K8S_HEALTH_CHECK_SECONDS", default=30.0),
    # One active reconciler per cluster: the Lease LEASE_NAME in LEASE_NAMESPACE (default: Cairn's
    # namespace) of each cluster; a standby takes over LEASE_SECONDS after the leader last renewed.
    "LEADER_ELECTION": env.bool("CAIRN_K8S_LEADER_ELECTION", default=True),
    "LEASE_NAME": env.str("CAIRN_K8S_LEASE_NAME", default="cairn-reconciler"),
    "LEASE_NAMESPACE": env.str("CAIRN_K8S_LEASE_NAMESPACE", default=""),
    "LEASE_SECONDS": env.float("CAIRN_K8S_LEASE_SECONDS", default=15.0),
    "RENEW_DEADLINE_SECONDS": env.float("CAIRN_K8S_RENEW_DEADLINE_SECONDS", default=10.0),
    "LEASE_RETRY_SECONDS": env.float("CAIRN_K8S_LEASE_RETRY_SECONDS", default=2.0),
    # Run-time limits: the Job controller enforces activeDeadlineSeconds; a training Job still
    # running this long after the limit is stopped by Cairn's reconciler instead.
    "DEADLINE_BACKSTOP_SECONDS": env.float("CAIRN_K8S_DEADLINE_BACKSTOP_SECONDS", default=120.0),
    # Isolation (docs/kubernetes.md, "Exactly what Cairn creates"): default-deny NetworkPolicies
    # per project namespace; Cairn's namespace; Cairn's addresses when it runs outside the
    # cluster; where else pods may connect (CIDRs, e.g. 0.0.0.0/0).
    "NETWORK_POLICIES": env.bool("CAIRN_K8S_NETWORK_POLICIES", default=True),
    "CAIRN_NAMESPACE": env.str("CAIRN_K8S_CAIRN_NAMESPACE", default="cairn-system"),
    "CAIRN_CIDRS": env.list("CAIRN_K8S_CAIRN_CIDRS", default=[]),
    "EGRESS_CIDRS": env.list("CAIRN_K8S_EGRESS_CIDRS", default=[]),
    # A finished workload's objects are deleted this long after it ended (its Secrets at once).
    "RETENTION_SECONDS": env.float("CAIRN_K8S_RETENTION_SECONDS", default=86400.0),
    # Pods a controller keeps failing to create (Pod Security, quota) fail the workload after this.
    "POD_CREATE_TIMEOUT_SECONDS": env.float("CAIRN_K8S_POD_CREATE_TIMEOUT_SECONDS", default=300.0),
    # A replica no node takes this long is requeued (its quota released; a pool may set its own).
    "PENDING_TIMEOUT_SECONDS": env.float("CAIRN_K8S_PENDING_TIMEOUT_SECONDS", default=600.0),
    # A node not Ready this long is unhealthy and its training pods are requeued elsewhere.
    "NODE_LOST_GRACE_SECONDS": env.float("CAIRN_K8S_NODE_LOST_GRACE_SECONDS", default=60.0),
    # Each container's ephemeral-storage limit ("" for none); P0-P5 -> PriorityClass names.
    "EPHEMERAL_STORAGE": env.str("CAIRN_K8S_EPHEMERAL_STORAGE", default="50Gi"),
    "PRIORITY_CLASSES": env.dict("CAIRN_K8S_PRIORITY_CLASSES", default={}),
}
# Key for credentials encrypted at rest (cluster kubeconfigs); SECRET_KEY when empty.
CAIRN_ENCRYPTION_KEY = env.str("CAIRN_ENCRYPTION_KEY", default="")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"redact_secrets": {"()": "apps.core.logsafe.RedactSecrets"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact_secrets"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # httpx logs every request at INFO: each one the notebook proxy, the culler, the gateway and its probes send.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
