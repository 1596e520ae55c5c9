"""The activity pool (ADR-005): domain types, ports, errors and the reference MemoryPool.

No Django here: this package is the domain, reusable by the web app, the Celery workers and
tools. ``RedisPool``, the production deep module, arrives with the RedisPool issue and passes
the same contract suite (``activity.contract``).
"""

from activity.clock import Clock, ManualClock, SystemClock
from activity.credentials import (
    Credential,
    CredentialResolver,
    CredentialUnavailable,
    CredentialVersion,
    SecretRef,
    StaticCredentials,
)
from activity.memory import MemoryPool
from activity.types import (
    Assignment,
    DrainStatus,
    DrainTicket,
    ExtractedProxy,
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    ExtractResult,
    FetchedBatch,
    FetchedProxy,
    HealthResult,
    HealthUpdate,
    PoolOptions,
    ProxyState,
    ReportResult,
    RuntimeEntry,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    SweepResult,
    UpsertResult,
    UpstreamInventory,
    WorkerAssignments,
    WorkerSession,
)

__all__ = [
    "Assignment",
    "Clock",
    "Credential",
    "CredentialResolver",
    "CredentialUnavailable",
    "CredentialVersion",
    "DrainStatus",
    "DrainTicket",
    "ExtractFilters",
    "ExtractMode",
    "ExtractRequest",
    "ExtractResult",
    "ExtractedProxy",
    "FetchedBatch",
    "FetchedProxy",
    "HealthResult",
    "HealthUpdate",
    "ManualClock",
    "MemoryPool",
    "PoolOptions",
    "ProxyState",
    "ReportResult",
    "RuntimeEntry",
    "RuntimeReport",
    "RuntimeView",
    "SecretRef",
    "SnapshotRef",
    "StaticCredentials",
    "SweepResult",
    "SystemClock",
    "UpsertResult",
    "UpstreamInventory",
    "WorkerAssignments",
    "WorkerSession",
]
