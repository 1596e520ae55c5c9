"""The outcome quality aggregates' buckets and retention.

The rows are written by the usage stream's consumer (pool_admin/metrics/aggregates.py), which
adds each outcome report the API accepted, exactly once; here: the minute a time falls in, and
the pruning of rows past their retention.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pool_admin.config.models import UpstreamQuality


def minute_of(at: datetime) -> datetime:
    """The start of the UTC minute ``at`` falls in (the aggregate's bucket)."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


#: Rows one prune_quality call deletes at most (one statement; the next call goes on).
PRUNE_BATCH = 10_000


def prune_quality(retention: timedelta, now: datetime | None = None) -> tuple[int, bool]:
    """Delete up to ``PRUNE_BATCH`` rows older than ``retention``, oldest first.

    Returns (rows deleted, whether older rows remain). Keeps the aggregates table bounded by
    upstreams x minutes of retention; Celery beat calls it every few minutes.
    """
    cutoff = minute_of((now or datetime.now(UTC)) - retention)
    old = UpstreamQuality.objects.filter(minute__lt=cutoff).order_by("minute")
    ids = list(old.values_list("pk", flat=True)[: PRUNE_BATCH + 1])
    deleted, _ = UpstreamQuality.objects.filter(pk__in=ids[:PRUNE_BATCH]).delete()
    return deleted, len(ids) > PRUNE_BATCH
