"""Input checks done in Python before any store is touched (ADR-005, "Provider Upsert").

Both implementations call these, so bad input gets the same typed error from either, and a
rejected call never changes anything. Each port family's checks live in the module named after
it (``upsert``, ``extract``, ``sessions``, ``outcomes``; what they share in ``common`` and
``activity._checks``); this package gathers them under the one name a pool implementation
imports (``from activity import _validation as v``).
"""

from activity._checks import MAX_COUNTER, aware_ms, count, digest, duration_ms, token
from activity._validation.common import MAX_CONCURRENCY, epoch, limit, text
from activity._validation.extract import (
    FILTER_DIMENSIONS,
    QUOTA_MAX_WINDOW_MS,
    PreparedExtract,
    PreparedQuota,
    prepare_charge,
    prepare_extract,
    prepare_quota,
)
from activity._validation.outcomes import PreparedOutcome, prepare_outcome, quarantine_query
from activity._validation.sessions import PreparedReport, prepare_report, proxy_ids, snapshot_ref
from activity._validation.upsert import (
    PreparedBatch,
    PreparedHealth,
    PreparedProxy,
    PreparedRecheck,
    prepare_batch,
    prepare_health,
    prepare_recheck,
    unique_key_digest,
)
from activity.types import QUOTA_MAX_UNITS

__all__ = [
    "FILTER_DIMENSIONS",
    "MAX_CONCURRENCY",
    "MAX_COUNTER",
    "QUOTA_MAX_UNITS",
    "QUOTA_MAX_WINDOW_MS",
    "PreparedBatch",
    "PreparedExtract",
    "PreparedHealth",
    "PreparedOutcome",
    "PreparedProxy",
    "PreparedQuota",
    "PreparedRecheck",
    "PreparedReport",
    "aware_ms",
    "count",
    "digest",
    "duration_ms",
    "epoch",
    "limit",
    "prepare_batch",
    "prepare_charge",
    "prepare_extract",
    "prepare_health",
    "prepare_outcome",
    "prepare_quota",
    "prepare_recheck",
    "prepare_report",
    "proxy_ids",
    "quarantine_query",
    "snapshot_ref",
    "text",
    "token",
    "unique_key_digest",
]
