"""Django settings, read from the environment (see README's configuration table).

Every variable goes through a typed helper in ``activity.env`` that fails fast with the
variable's name. One Redis URL per role: the activity pool, metrics, the Celery broker.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE

from activity.env import (
    EnvError,
    check_fernet_keys,
    env_bool,
    env_int,
    env_list,
    env_secret,
    env_str,
    env_url,
)
from activity.redact import redact_url
from activity.redis_url import is_sentinel_url, kombu_sentinel
from activity.types import PoolOptions
from pool_admin import defaults
from pool_admin.defaults import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL
from pool_admin.proxy_headers import parse_networks

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(env_str("RUN_DIR", str(BASE_DIR / ".run")))

DEBUG = env_bool("DEBUG", default=False)
# POOL_DEV=1 marks a development machine (make run and the test harness set it): only then, or
# with DEBUG, may the built-in development secrets below be used.
DEV_DEFAULTS_ALLOWED = DEBUG or env_bool("POOL_DEV", default=False)

SECRET_KEY = env_secret(
    "DJANGO_SECRET_KEY",
    dev_default="dev-only-insecure-django-secret-key-do-not-deploy-0123456789",
    allow_dev_default=DEV_DEFAULTS_ALLOWED,
)
# Keys that encrypt provider API credentials at rest (Fernet), comma-separated: the first
# encrypts, all decrypt, so a new key goes first and `manage.py rotate_secret_key` re-encrypts
# every row before the old key is dropped (pool_admin/config/secrets.py).
POOL_SECRET_KEYS = check_fernet_keys(
    "POOL_SECRET_KEY",
    env_secret(
        "POOL_SECRET_KEY",
        dev_default="ZGV2LW9ubHktcG9vbC1zZWNyZXQta2V5LTMyYnl0ZXM=",  # dev only
        allow_dev_default=DEV_DEFAULTS_ALLOWED,
    ),
)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
# The web server (pool_admin/rsgi.py): threads per worker running the application, the
# seconds a request body may take after its headers before it is answered 408, and whether
# each request gets an access log line (the ``pool_admin.access`` logger, on standard output).
WEB_THREADS = env_int("WEB_THREADS", defaults.WEB_THREADS, minimum=1)
WEB_BODY_TIMEOUT_S = env_int("WEB_BODY_TIMEOUT_S", defaults.WEB_BODY_TIMEOUT_S, minimum=1)
WEB_ACCESS_LOG = env_bool("WEB_ACCESS_LOG", True)
# The reverse proxies in front of the web servers (deploy/nginx/proxypool.conf): only a request
# from an address in these networks has its client's address (X-Real-IP) and scheme
# (X-Forwarded-Proto) believed; from anywhere else both are dropped (pool_admin/proxy_headers.py).
# Empty (the default): nothing is believed, the peer is the client.
try:
    WEB_TRUSTED_PROXIES = parse_networks(
        [text for text in env_str("WEB_TRUSTED_PROXIES", "").split(",") if text.strip()]
    )
except ValueError as _exc:
    raise EnvError(f"WEB_TRUSTED_PROXIES: {_exc}") from None
# The demo provider (pool_admin/demo.py): its vendor emulator answers only when this is on;
# ``make run`` turns it on unless DEMO=0.
DEMO = env_bool("DEMO", False)
# Failure alerts of the fetches (pool_admin/alerts.py): log, email or webhook; a failing
# notifier is logged only.
ALERT_NOTIFIER = env_str("ALERT_NOTIFIER", "log")
if ALERT_NOTIFIER not in {"log", "email", "webhook"}:
    raise EnvError(f"ALERT_NOTIFIER must be log, email or webhook, got {ALERT_NOTIFIER!r}")
ALERT_EMAIL_TO = [a.strip() for a in env_str("ALERT_EMAIL_TO", "").split(",") if a.strip()]
ALERT_WEBHOOK_URL = env_str("ALERT_WEBHOOK_URL", "")
ALERT_RETENTION_DAYS = env_int("ALERT_RETENTION_DAYS", 90, minimum=1)
EMAIL_TIMEOUT = 10

# redis+sentinel://: a master behind Redis Sentinel (activity/redis_url.py, docs/OPERATIONS.md).
_REDIS_SCHEMES = frozenset({"redis", "rediss", "unix", "redis+sentinel"})
REDIS_URL = env_url("REDIS_URL", DEFAULT_REDIS_URL, _REDIS_SCHEMES)
METRICS_REDIS_URL = env_url("METRICS_REDIS_URL", REDIS_URL, _REDIS_SCHEMES)
# The usage stream (pool_admin/metrics/): its key on METRICS_REDIS_URL (named after the pool's
# prefix, so two deployments on one Redis keep apart), bounded with MAXLEN ~ in entries (each
# one process's 0.1 s of events: at most 10 a second a process, README); its consumer group
# and dead-letter stream.
METRICS_STREAM_MAXLEN = env_int("METRICS_STREAM_MAXLEN", 100_000, minimum=1_000)
# Who may scrape GET /metrics: client addresses in these networks (default: loopback only).
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network)
    except ValueError:
        raise EnvError(f"METRICS_ALLOWED_NETWORKS: {_network!r} is not a network") from None
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", REDIS_URL, _REDIS_SCHEMES)
# kombu reads Sentinel in its own form: one sentinel:// URL per Sentinel and the master's name
# in the transport options (kombu/transport/redis.py, SentinelChannel). Celery takes the
# CELERY_BROKER_URL environment variable before its configuration's broker_url
# (celery.app.utils.Settings.broker_url), so the kombu form goes in the read and write URLs,
# which it takes before either.
# The broker's Redis as configured (CELERY_BROKER_URL may become kombu's form below): what
# `manage.py doctor` connects to.
BROKER_REDIS_URL = CELERY_BROKER_URL
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if is_sentinel_url(CELERY_BROKER_URL):
    CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = kombu_sentinel(CELERY_BROKER_URL)
    CELERY_BROKER_READ_URL = CELERY_BROKER_WRITE_URL = CELERY_BROKER_URL
# Key prefix of the activity pool's namespace in Redis (PoolOptions.prefix).
POOL_PREFIX = env_str("POOL_PREFIX", "pp")
if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}", POOL_PREFIX):
    raise EnvError("POOL_PREFIX must be 1-32 characters of A-Z a-z 0-9 . _ -, starting alnum")
METRICS_STREAM = f"{POOL_PREFIX}:{{metrics}}:events"
METRICS_GROUP = "aggregates"
METRICS_DEAD_LETTER = f"{POOL_PREFIX}:{{metrics}}:dead"

# How long a banned proxy's exit is not taken again (outcome reports; 0: never quarantined):
# the pool's PoolOptions.default_quarantine, at most its max_quarantine.
_MAX_QUARANTINE_S = int(PoolOptions().max_quarantine.total_seconds())
POOL_BAN_QUARANTINE_S = env_int(
    "POOL_BAN_QUARANTINE_S", int(PoolOptions().default_quarantine.total_seconds()), minimum=0
)
if POOL_BAN_QUARANTINE_S > _MAX_QUARANTINE_S:
    raise EnvError(
        f"POOL_BAN_QUARANTINE_S must be at most {_MAX_QUARANTINE_S}, got {POOL_BAN_QUARANTINE_S}"
    )

DATABASE_URL = env_url(
    "DATABASE_URL", DEFAULT_DATABASE_URL, frozenset({"postgres", "postgresql", "pgsql"})
)
try:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
except ValueError:
    raise EnvError(
        f"DATABASE_URL is not a valid database URL: {redact_url(DATABASE_URL)}"
    ) from None
# A dead database must fail a request in seconds, not hang a worker.
_database.setdefault("OPTIONS", {})["connect_timeout"] = env_int(
    "DATABASE_CONNECT_TIMEOUT", 3, minimum=2
)
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django.contrib.postgres",
    "simple_history",
    "axes",
    "csp",
    "pool_admin",
    "pool_admin.config",
    "pool_admin.console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.common.CommonMiddleware",
    # SITE_MIDDLEWARE, in this place, for every path but the client API's (/api/v1/: API keys,
    # no session or cookie): pool_admin/api/middleware.py.
    "pool_admin.api.middleware.SiteOnlyMiddleware",
]
SITE_MIDDLEWARE = [
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Lets django-simple-history record which operator made each configuration change.
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 page.
    "axes.middleware.AxesMiddleware",
]
# The admin's and django-axes' checks look for their middleware in MIDDLEWARE only; it runs from
# SITE_MIDDLEWARE for every admin page, and pool_admin/checks.py demands it there instead
# (pool_admin.E001, E002).
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410", "axes.W002"]

# A new API key's plaintext is shown once through a message. Messages stay on the server (in
# the session, deleted once displayed): a cookie is only signed, so the key would be readable
# in the browser's cookie store, a proxy's log or a cookie-stealing extension.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# Admin login throttling (django-axes): 5 wrong passwords for one username from one address
# lock that pair out for 15 minutes (429); a successful login clears its failures. Operators see
# attempts and lockouts in the admin (Axes: access attempts, failures, logs) and lift one by
# deleting its attempt there or with `manage.py axes_reset`. The address is REMOTE_ADDR: behind
# the reverse proxy, the client's when the proxy is in WEB_TRUSTED_PROXIES.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out pair before any check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# No start-up banner: every manage.py command would print it (and commands' output is parsed).
# Failures and lockouts are still logged, username and address masked.
AXES_VERBOSE = False

ROOT_URLCONF = "pool_admin.urls"
WSGI_APPLICATION = "pool_admin.wsgi.application"

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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files: collectstatic (make run) copies them here and whitenoise serves them, so
# the web server alone renders the admin with its CSS.
STATIC_URL = "static/"
STATIC_ROOT = RUN_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Security. Cookies are marked Secure only behind HTTPS (SECURE_COOKIES=1), since `make run`
# serves plain HTTP on loopback and a Secure cookie would make the admin login impossible.
SECURE_COOKIES = env_bool("SECURE_COOKIES", default=False)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# HSTS once the site is served over HTTPS (SECURE_COOKIES=1 says it is): Django sends it only on
# requests that arrived over TLS. A year, this host only (subdomains may not all be HTTPS).
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if SECURE_COOKIES else 0

# Content-Security-Policy of the admin and the API docs (django-csp; CSPMiddleware runs from
# SITE_MIDDLEWARE, so the client API's JSON answers skip it). Scripts only from this origin:
# the admin has no inline script, and the docs use drf-spectacular's split view, whose start-up
# script is a file too. Inline styles are allowed: Swagger UI sets them as it renders and the
# admin has a few; they cannot run code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # The client APIs authenticate with API keys only (pool_admin/api/auth.py); sessions are
    # for the admin. Every error leaves as problem+json (pool_admin/api/problems.py).
    "DEFAULT_AUTHENTICATION_CLASSES": ["pool_admin.api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["pool_admin.api.auth.IsApiClient"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["pool_admin.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "pool_admin.api.problems.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Proxy Pool API",
    "DESCRIPTION": "Extract API and gateway control API of the proxy pool.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI assets come from drf-spectacular-sidecar: no CDN needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# Celery: broker only; nobody reads task results, so there is no result backend.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# django-celery-beat's database scheduler, writing beat's heartbeat every BEAT_HEARTBEAT_S
# (pool_admin/beat.py); `manage.py doctor` fails beat when the heartbeat is older than
# BEAT_HEARTBEAT_MAX_AGE_S.
CELERY_BEAT_SCHEDULER = "pool_admin.beat:Scheduler"
BEAT_HEARTBEAT_S = env_int("BEAT_HEARTBEAT_S", 5, minimum=1, maximum=300)
BEAT_HEARTBEAT_MAX_AGE_S = env_int("BEAT_HEARTBEAT_MAX_AGE_S", 30, minimum=2, maximum=3_600)
if BEAT_HEARTBEAT_MAX_AGE_S <= BEAT_HEARTBEAT_S:
    raise EnvError("BEAT_HEARTBEAT_MAX_AGE_S must be longer than BEAT_HEARTBEAT_S")
# Vendor fetches have a queue and a worker of their own, many threads: a fetch waits on its
# vendor (up to its upstream's deadline) and must hold up neither other accounts' fetches nor
# the dispatches, sweeps and ownership expiry on the default queue (their own worker).
# FETCH_WORKER_THREADS bounds the fetches in flight at once: keep it at least the sum of the
# enabled accounts' fetch concurrency (the dispatch warns when it is not).
# Rechecks too (CHECK_QUEUE, CHECK_WORKER_THREADS): a run probes for up to its period, and the
# 2-second fetch dispatch must never wait behind them.
FETCH_QUEUE = "fetches"
CHECK_QUEUE = "checks"
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ROUTES = {
    "pool_admin.fetch_upstream": {"queue": FETCH_QUEUE},
    "pool_admin.check_upstream": {"queue": CHECK_QUEUE},
}
FETCH_WORKER_THREADS = env_int("FETCH_WORKER_THREADS", 32, minimum=1, maximum=512)
CHECK_WORKER_THREADS = env_int("CHECK_WORKER_THREADS", 8, minimum=1, maximum=128)
UPKEEP_WORKER_THREADS = env_int("UPKEEP_WORKER_THREADS", 4, minimum=1, maximum=64)
HEARTBEAT_PERIOD = timedelta(seconds=30)
# Usage aggregates (config/models/usage.py): minute rows roll up into hourly rows after
# USAGE_ROLLUP_AFTER_HOURS, rows go after USAGE_RETENTION_DAYS, in batches every
# USAGE_RETENTION_PERIOD (pool_admin/metrics/retention.py).
USAGE_ROLLUP_AFTER_HOURS = env_int("USAGE_ROLLUP_AFTER_HOURS", 48, minimum=1, maximum=24 * 366)
USAGE_RETENTION_DAYS = env_int("USAGE_RETENTION_DAYS", 90, minimum=1, maximum=3_660)
if USAGE_RETENTION_DAYS * 24 <= USAGE_ROLLUP_AFTER_HOURS:
    raise EnvError("USAGE_RETENTION_DAYS must be longer than USAGE_ROLLUP_AFTER_HOURS")
USAGE_RETENTION_PERIOD = timedelta(minutes=5)
# Beat's periods for filling and cleaning the pool (each run bounded; a run not started within
# its period is dropped).
FETCH_DISPATCH_PERIOD = timedelta(seconds=2)
# How long a fetch's claim lasts without a renewal: a worker that dies mid-fetch holds its
# upstream this long, then the fetch is claimed again (a fetch renews before each round).
FETCH_LEASE = timedelta(seconds=env_int("FETCH_LEASE_S", 120, minimum=1, maximum=3_600))
# A vendor's Retry-After (a 429 or 503 asking us to wait) is honoured up to this long: the next
# fetch of its upstream waits what it asked, or what the error's back-off says if longer.
FETCH_MAX_RETRY_AFTER = timedelta(
    seconds=env_int("FETCH_MAX_RETRY_AFTER_S", 3_600, minimum=0, maximum=86_400)
)
# Rechecks of idle proxies (pool_admin/recheck_tasks.py): each upstream's check_interval_s is the
# floor; an AVAILABLE proxy is due a RECHECK_LIFETIME_FRACTION of its remaining life after its
# last check, and none with under RECHECK_MIN_REMAINING left is probed again.
CHECK_DISPATCH_PERIOD = timedelta(seconds=10)
RECHECK_LIFETIME_FRACTION = env_int("RECHECK_LIFETIME_FRACTION", 10, minimum=1, maximum=1_000)
RECHECK_MIN_REMAINING = timedelta(seconds=env_int("RECHECK_MIN_REMAINING_S", 120, minimum=0))
SWEEP_PERIOD = timedelta(seconds=30)
EXPIRE_PERIOD = timedelta(seconds=10)
OWNERSHIP_TICK_PERIOD = timedelta(seconds=2)
# The gateway workers' control traffic (docs/gateway.md, "The control API"): a session lives
# GATEWAY_SESSION_TTL_S past its last heartbeat; the session's answer tells the worker how often
# to heartbeat, poll its snapshot and report; a worker stops taking new traffic when its
# snapshot is older than GATEWAY_MAX_STALENESS_S.
GATEWAY_SESSION_TTL_S = env_int("GATEWAY_SESSION_TTL_S", 30, minimum=5, maximum=3_600)
GATEWAY_HEARTBEAT_S = max(1, GATEWAY_SESSION_TTL_S // 3)
GATEWAY_SNAPSHOT_INTERVAL_S = env_int("GATEWAY_SNAPSHOT_INTERVAL_S", 2, minimum=1, maximum=60)
GATEWAY_REPORT_INTERVAL_S = env_int("GATEWAY_REPORT_INTERVAL_S", 5, minimum=1, maximum=60)
GATEWAY_MAX_STALENESS_S = env_int("GATEWAY_MAX_STALENESS_S", 30, minimum=5, maximum=3_600)
CELERY_BEAT_SCHEDULE = {
    "heartbeat": {
        "task": "pool_admin.heartbeat",
        "schedule": HEARTBEAT_PERIOD,
        # A run not started within one period is dropped, so a backlog never piles up.
        "options": {"expires": HEARTBEAT_PERIOD.total_seconds()},
    },
    "keep-usage-bounded": {
        "task": "pool_admin.keep_usage_bounded",
        "schedule": USAGE_RETENTION_PERIOD,
        "options": {"expires": USAGE_RETENTION_PERIOD.total_seconds()},
    },
    # The pool fills itself (pool_admin/fetch_tasks.py): due fetches claimed per provider account.
    "dispatch-fetches": {
        "task": "pool_admin.dispatch_fetches",
        "schedule": FETCH_DISPATCH_PERIOD,
        "options": {"expires": FETCH_DISPATCH_PERIOD.total_seconds()},
    },
    "dispatch-checks": {
        "task": "pool_admin.dispatch_checks",
        "schedule": CHECK_DISPATCH_PERIOD,
        "options": {"expires": CHECK_DISPATCH_PERIOD.total_seconds()},
    },
    "sweep-pool": {
        "task": "pool_admin.sweep_pool",
        "schedule": SWEEP_PERIOD,
        "options": {"expires": SWEEP_PERIOD.total_seconds()},
    },
    "expire-ownership": {
        "task": "pool_admin.expire_ownership",
        "schedule": EXPIRE_PERIOD,
        "options": {"expires": EXPIRE_PERIOD.total_seconds()},
    },
    # The gateway's ownership manager (pool_admin/gateway_tasks.py): one tick at a time.
    "ownership-tick": {
        "task": "pool_admin.ownership_tick",
        "schedule": OWNERSHIP_TICK_PERIOD,
        "options": {"expires": OWNERSHIP_TICK_PERIOD.total_seconds()},
    },
}

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise EnvError(f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "activity.redact.RedactPasswordsFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        # An access log record is a batch of lines, each complete (pool_admin/rsgi.py).
        "lines": {"format": "%(message)s"},
    },
    "handlers": {
        "stderr": {
            "class": "pool_admin.logstream.CurrentStderrHandler",
            "formatter": "plain",
            "filters": ["redact"],
        },
        "stdout_lines": {
            "class": "pool_admin.logstream.CurrentStdoutHandler",
            "formatter": "lines",
            "filters": ["redact"],
        },
    },
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    "loggers": {
        "pool_admin.access": {"handlers": ["stdout_lines"], "level": "INFO", "propagate": False},
        # httpx logs every request's URL at INFO, query string included: a vendor's API key
        # or signature is often there (docs/OPERATIONS.md, "Filling the pool").
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
