"""Configuration models, and the usage aggregates (``usage.py``, written by the usage stream).
PostgreSQL never holds a proxy or its record. One module per subject; import them from here.

Every model validates in ``save()`` (``full_clean``), so the admin, the operator commands and the
API cannot store a value the pool would reject later. History (who changed what) is kept by
django-simple-history; secret material is excluded from it.
"""

from pool_admin.config.models.accounts import ProviderAccount
from pool_admin.config.models.alerts import Alert
from pool_admin.config.models.applied import AppliedEntry
from pool_admin.config.models.base import LABEL_HELP, LABEL_RE, PROTOCOL_CHOICES, validate_label
from pool_admin.config.models.clients import ApiClient, ApiKey
from pool_admin.config.models.credentials import Credential
from pool_admin.config.models.heartbeats import Heartbeat
from pool_admin.config.models.upstreams import Upstream
from pool_admin.config.models.usage import (
    ClientDraws,
    ClientUsage,
    GatewayActivity,
    GatewayTicks,
    GatewayTraffic,
    UpstreamChecks,
    UpstreamDrops,
    UpstreamQuality,
    UsageRow,
    UsageTotal,
)
from pool_admin.config.models.workers import GatewayWorker, WorkerGroup, WorkerToken

__all__ = [
    "LABEL_HELP",
    "LABEL_RE",
    "PROTOCOL_CHOICES",
    "Alert",
    "ApiClient",
    "ApiKey",
    "AppliedEntry",
    "ClientDraws",
    "ClientUsage",
    "Credential",
    "GatewayActivity",
    "GatewayTicks",
    "GatewayTraffic",
    "GatewayWorker",
    "Heartbeat",
    "ProviderAccount",
    "Upstream",
    "UpstreamChecks",
    "UpstreamDrops",
    "UpstreamQuality",
    "UsageRow",
    "UsageTotal",
    "WorkerGroup",
    "WorkerToken",
    "validate_label",
]
