"""What the consumer adds to PostgreSQL for a batch of events: per-minute rows, added to.

Every write is an ``INSERT ... ON CONFLICT DO UPDATE SET column = column + EXCLUDED.column`` of
the batch's sums, so rows of one minute written by two consumers at once add up (no read, no
lost update), inside the consumer's transaction with the applied IDs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db import connection

from activity.types import Outcome
from pool_admin.config.models import UpstreamQuality
from pool_admin.metrics.events import Event

_MINUTE_MS = 60_000
_OUTCOMES = [o.value for o in Outcome]


def apply_events(events: Sequence[Event]) -> None:
    """Add the events' counts to their aggregates (inside the caller's transaction)."""
    outcomes: Counter[tuple[str, int, str]] = Counter()
    for event in events:
        if event.kind == "outcome":
            minute = event.at_ms - event.at_ms % _MINUTE_MS
            outcomes[(event.fields["upstream"], minute, event.fields["outcome"])] += 1
    if outcomes:
        _add_outcomes(outcomes)


def _add_outcomes(counts: Counter[tuple[str, int, str]]) -> None:
    rows: dict[tuple[str, int], dict[str, int]] = {}
    for (upstream, minute, outcome), n in counts.items():
        rows.setdefault((upstream, minute), dict.fromkeys(_OUTCOMES, 0))[outcome] += n
    keys = sorted(rows)  # one order for every writer: concurrent upserts never deadlock
    columns = ", ".join(_OUTCOMES)
    table = UpstreamQuality._meta.db_table
    arrays: list[Any] = [[u for u, _ in keys], [m / 1000 for _, m in keys]]
    arrays += [[rows[key][o] for key in keys] for o in _OUTCOMES]
    unnest = ", ".join(
        ["unnest(%s::text[])", "to_timestamp(unnest(%s::double precision[]))"]
        + ["unnest(%s::integer[])"] * len(_OUTCOMES)
    )
    updates = ", ".join(f"{o} = {table}.{o} + EXCLUDED.{o}" for o in _OUTCOMES)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (upstream, minute, {columns}) SELECT {unnest} "
            f"ON CONFLICT (upstream, minute) DO UPDATE SET {updates}",
            arrays,
        )
