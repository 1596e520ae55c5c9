"""Health checks through real proxies (issue 12): ``probe`` one, ``probe_all`` many at bounded
concurrency, ``health_of`` what a result means for the pool. Plain asyncio, no Django, no
Redis: the caller resolves credentials and applies the updates (``apply_health``)."""

from activity.checker.probe import CheckTarget, Failure, ProbeResult, ProxyEndpoint, probe
from activity.checker.runner import (
    LOOPS,
    MAX_CHECKS,
    MAX_CONCURRENCY,
    check_all,
    health_of,
    probe_all,
)

__all__ = [
    "LOOPS",
    "MAX_CHECKS",
    "MAX_CONCURRENCY",
    "CheckTarget",
    "Failure",
    "ProbeResult",
    "ProxyEndpoint",
    "check_all",
    "health_of",
    "probe",
    "probe_all",
]
