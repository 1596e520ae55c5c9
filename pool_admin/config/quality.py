"""The one way outcome reports reach the quality aggregates in PostgreSQL.

``record_outcomes`` adds counts to an upstream's row for one minute, atomically (an UPDATE with
``F()`` expressions; the row is created on the first report of the minute, and a concurrent
creation is absorbed by updating instead). The API calls it once per accepted report; the
metrics consumer will call it with the counts it aggregated from its stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F

from activity import Outcome
from pool_admin.config.models import UpstreamQuality


def minute_of(at: datetime) -> datetime:
    """The start of the UTC minute ``at`` falls in (the aggregate's bucket)."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def record_outcomes(upstream: str, at: datetime, counts: Mapping[Outcome, int]) -> None:
    """Add ``counts`` to ``upstream``'s row for the minute of ``at``.

    A DatabaseError (PostgreSQL unreachable, ...) propagates: the caller decides whether a lost
    aggregate matters (the API logs it and answers anyway: the report itself is in Redis).
    """
    # The columns are named after the outcomes' values.
    deltas = {Outcome(outcome).value: n for outcome, n in counts.items() if n}
    if not deltas:
        return
    rows = UpstreamQuality.objects.filter(upstream=upstream, minute=minute_of(at))
    increments = {name: F(name) + n for name, n in deltas.items()}
    if rows.update(**increments):
        return
    try:
        with transaction.atomic():  # a savepoint: a lost race must not spoil the caller's
            UpstreamQuality.objects.create(upstream=upstream, minute=minute_of(at), **deltas)
    except IntegrityError:
        rows.update(**increments)  # another request created the row first; it is there now


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
