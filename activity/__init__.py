"""The activity pool (ADR-005): domain types, ports, errors and the reference MemoryPool.

No Django here: this package is the domain, reusable by the web app, the Celery workers and
tools. ``RedisPool`` (``activity.redis``), the production deep module, passes the same contract
suite (``activity.contract``); it is imported lazily so that importing the domain types never
imports a Redis client (a process that holds no pool, such as a gateway worker, needs none).
"""

from typing import TYPE_CHECKING, Any

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
    AssignableProxies,
    AssignableProxy,
    Assignment,
    CallQuota,
    DrainStatus,
    DrainTicket,
    DueCheck,
    DueChecks,
    ExtractedProxy,
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    ExtractResult,
    FetchedBatch,
    FetchedProxy,
    HealthResult,
    HealthUpdate,
    HeldProxy,
    Outcome,
    OutcomeReport,
    OutcomeResult,
    PoolOptions,
    ProxyState,
    RecheckPolicy,
    ReportResult,
    RuntimeEntry,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    SweepResult,
    UpsertResult,
    UpstreamInventory,
    WorkerAssignments,
    WorkerRevision,
    WorkerSession,
)

if TYPE_CHECKING:
    from activity.redis import RedisPool


def __getattr__(name: str) -> Any:
    if name == "RedisPool":
        from activity.redis import RedisPool

        return RedisPool
    raise AttributeError(f"module 'activity' has no attribute {name!r}")


__all__ = [
    "AssignableProxies",
    "AssignableProxy",
    "Assignment",
    "CallQuota",
    "Clock",
    "Credential",
    "CredentialResolver",
    "CredentialUnavailable",
    "CredentialVersion",
    "DrainStatus",
    "DrainTicket",
    "DueCheck",
    "DueChecks",
    "ExtractFilters",
    "ExtractMode",
    "ExtractRequest",
    "ExtractResult",
    "ExtractedProxy",
    "FetchedBatch",
    "FetchedProxy",
    "HealthResult",
    "HealthUpdate",
    "HeldProxy",
    "ManualClock",
    "MemoryPool",
    "Outcome",
    "OutcomeReport",
    "OutcomeResult",
    "PoolOptions",
    "ProxyState",
    "RecheckPolicy",
    "RedisPool",
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
    "WorkerRevision",
    "WorkerSession",
]
