"""Retention of the usage aggregates: minute rows roll up into hourly rows after
``USAGE_ROLLUP_AFTER_HOURS``; every row goes after ``USAGE_RETENTION_DAYS``. Totals
(``UsageTotal``) are never rolled up or pruned: they are counters.

Both run from Celery beat, in bounded batches (``BATCH`` rows of one table per statement;
``keep_bounded`` does at most one batch per table and says whether more remain). A run
(``keep_bounded_within``) repeats them while more remain, for at most ``RUN_BUDGET_S``: one
batch per run would move 1,000 rows a minute at most, less than client x upstream x region
draws can make, and a backlog would never shrink.
A roll-up is one statement per table: the minute rows it deletes are summed into their hour's
row in the same statement (``WITH moved AS (DELETE ... RETURNING ...) INSERT ... ON CONFLICT
DO UPDATE``), so a figure is never in both or in neither. A late event that lands in a rolled
up minute makes a new minute row that the next run rolls up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from pool_admin.metrics.aggregates import TABLES, Table

#: Rows one statement rolls up or deletes at most.
BATCH = 5_000
#: Longest a run goes on while more remain (its period is 5 minutes: it ends well before).
RUN_BUDGET_S = 60.0


def minute_of(at: datetime) -> datetime:
    """The start of the UTC minute ``at`` falls in (a minute row's period)."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


@dataclass
class RetentionResult:
    rolled_up: int = 0
    deleted: int = 0
    #: True when a table had more rows to handle than one batch: run again.
    more: bool = False


def _roll_up(table: Table, cutoff: datetime) -> int:
    # Each dimension followed by a comma: a table may have none (GatewayTicks).
    dims = "".join(f"{d}, " for d in table.dimensions)
    sums = ", ".join(f"sum({c})" for c in table.values)
    values = ", ".join(table.values)
    updates = ", ".join(f"{c} = {table.name}.{c} + EXCLUDED.{c}" for c in table.values)
    with connection.cursor() as cursor:  # names are ours; every value is a parameter
        cursor.execute(
            f"WITH moved AS (DELETE FROM {table.name} WHERE id IN ("  # noqa: S608
            f"  SELECT id FROM {table.name} WHERE NOT hourly AND period_start < %s"
            "   ORDER BY period_start LIMIT %s"
            f") RETURNING {dims}period_start, {values}) "
            f"INSERT INTO {table.name} ({dims}period_start, hourly, {values}) "
            f"SELECT {dims}date_trunc('hour', period_start), true, {sums} FROM moved "
            f"GROUP BY {dims}date_trunc('hour', period_start) "
            f"ORDER BY {dims}date_trunc('hour', period_start) "
            f"ON CONFLICT ({dims}period_start, hourly) DO UPDATE SET {updates} "
            "RETURNING (SELECT count(*) FROM moved)",
            [cutoff, BATCH],
        )
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def _prune(table: Table, cutoff: datetime) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table.name} WHERE id IN (SELECT id FROM {table.name} "  # noqa: S608
            "WHERE period_start < %s ORDER BY period_start LIMIT %s)",
            [cutoff, BATCH],
        )
        return int(cursor.rowcount)


def keep_bounded(
    roll_up_after: timedelta, retention: timedelta, now: datetime | None = None
) -> RetentionResult:
    """One batch of roll-up and one of pruning per aggregate table."""
    now = now or datetime.now(UTC)
    result = RetentionResult()
    hour_cutoff = minute_of(now - roll_up_after).replace(minute=0)
    prune_cutoff = minute_of(now - retention)
    for table in TABLES:
        with transaction.atomic():
            rolled = _roll_up(table, hour_cutoff)
        deleted = _prune(table, prune_cutoff)
        result.rolled_up += rolled
        result.deleted += deleted
        result.more |= rolled >= BATCH or deleted >= BATCH
    return result


def keep_bounded_within(
    roll_up_after: timedelta, retention: timedelta, budget_s: float | None = None
) -> RetentionResult:
    """``keep_bounded`` again while more remain, for at most ``budget_s`` (``RUN_BUDGET_S``);
    what all the rounds did, ``more`` if time ran out first."""
    budget = RUN_BUDGET_S if budget_s is None else budget_s
    started = time.monotonic()
    total = RetentionResult(more=True)
    while total.more and time.monotonic() - started < budget:
        result = keep_bounded(roll_up_after, retention)
        total.rolled_up += result.rolled_up
        total.deleted += result.deleted
        total.more = result.more
    return total
