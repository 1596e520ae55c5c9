"""What the consumer adds to PostgreSQL for a batch of events: per-minute rows and totals.

Each event kind adds to one or more tables (config/models/usage.py) and to the deployment's
totals (``UsageTotal``, GET /metrics' counters). A batch is summed in Python first, then written
with one ``INSERT ... SELECT unnest(...) ON CONFLICT DO UPDATE SET column = column +
EXCLUDED.column`` per table: rows of one minute written by two consumers at once add up (no
read, no lost update), inside the consumer's transaction with the applied IDs. Every writer
writes the tables in one order and each table's rows sorted by key, so concurrent batches
never deadlock on each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, models

from activity.types import Outcome
from pool_admin.config.models import (
    ClientDraws,
    ClientUsage,
    GatewayActivity,
    GatewayTicks,
    GatewayTraffic,
    UpstreamChecks,
    UpstreamDrops,
    UpstreamQuality,
    UsageTotal,
)
from pool_admin.metrics.events import Event

MINUTE_MS = 60_000
OUTCOMES = tuple(o.value for o in Outcome)


@dataclass(frozen=True)
class Table:
    """An aggregate table: its dimension columns (text; the period and ``hourly`` follow) and
    the columns that add up."""

    model: type[models.Model]
    dimensions: tuple[str, ...]
    values: tuple[str, ...]

    @property
    def name(self) -> str:
        return str(self.model._meta.db_table)


QUALITY = Table(
    UpstreamQuality,
    ("upstream",),
    (
        *OUTCOMES,
        *("fetches", "received", "fetched", "refreshed", "became_available", "checked"),
        "check_latency_ms",
        *("checks_timed", "extracted", "first_use_ms", "expired_used", "expired_unused"),
    ),
)
DROPS = Table(UpstreamDrops, ("upstream", "reason"), ("entries",))
CHECKS = Table(UpstreamChecks, ("upstream", "source", "result"), ("proxies",))
CLIENT_USAGE = Table(ClientUsage, ("client", "outcome"), ("calls", "returned", "duration_ms"))
CLIENT_DRAWS = Table(ClientDraws, ("client", "upstream", "region"), ("proxies",))
#: No dimension: a tick is the whole deployment's (one row per period).
GATEWAY_TICKS = Table(GatewayTicks, (), ("ticks", "duration_ms", "cut_short", "expired"))
OWNERSHIP = ("assigned", "renewed", "drains_begun", "released", "refused")
GATEWAY_ACTIVITY = Table(GatewayActivity, ("worker_group",), (*OWNERSHIP, "snapshots_refused"))
#: A failure kind's column, and its ``kind`` label in the totals.
FAILURES = {
    "failed_connect": "connect",
    "failed_timeout": "timeout",
    "failed_upstream": "upstream",
    "failed_closed": "closed",
}
TRAFFIC = ("requests", "tunnels", "bytes_up", "bytes_down", *FAILURES)
#: ``errors``: every kind of failure (the rows from before the kinds were kept have only it).
GATEWAY_TRAFFIC = Table(
    GatewayTraffic, ("worker_group", "client", "upstream"), (*TRAFFIC, "errors")
)
#: Every aggregate table, in the one order every writer writes them.
TABLES = (
    QUALITY,
    DROPS,
    CHECKS,
    CLIENT_USAGE,
    CLIENT_DRAWS,
    GATEWAY_TICKS,
    GATEWAY_ACTIVITY,
    GATEWAY_TRAFFIC,
)


class Sums:
    """One batch's additions: per table, (dimensions, minute in ms) -> column -> amount; and
    the totals, (family, labels) -> amount."""

    def __init__(self) -> None:
        self.rows: dict[Table, dict[tuple[tuple[str, ...], int], Counter[str]]] = {
            table: {} for table in TABLES
        }
        self.totals: Counter[tuple[str, str]] = Counter()

    def add(self, table: Table, dimensions: tuple[str, ...], at_ms: int, **values: int) -> None:
        key = (dimensions, at_ms - at_ms % MINUTE_MS)
        row = self.rows[table].setdefault(key, Counter())
        for column, amount in values.items():
            row[column] += amount

    def total(self, family: str, *labels: str, amount: int = 1) -> None:
        if amount:
            self.totals[(family, "|".join(labels))] += amount


def _outcome(sums: Sums, e: Event) -> None:
    upstream, outcome = e.fields["upstream"], e.fields["outcome"]
    sums.add(QUALITY, (upstream,), e.at_ms, **{outcome: 1})
    sums.total("outcomes", upstream, outcome)


def _extract(sums: Sums, e: Event) -> None:
    f = e.fields
    client, outcome = f["client"], f["outcome"]
    sums.add(
        CLIENT_USAGE,
        (client, outcome),
        e.at_ms,
        calls=1,
        returned=f["returned"],
        duration_ms=f["duration_ms"],
    )
    sums.total("extract_calls", outcome)
    sums.total("extract_duration_ms", amount=f["duration_ms"])
    for upstream, region, n, age_ms in f.get("draws", ()):
        sums.add(CLIENT_DRAWS, (client, upstream, region), e.at_ms, proxies=n)
        sums.add(QUALITY, (upstream,), e.at_ms, extracted=n, first_use_ms=age_ms)
        sums.total("extracted", upstream, amount=n)
        sums.total("first_use_ms", upstream, amount=age_ms)


def _fetch(sums: Sums, e: Event) -> None:
    f = e.fields
    upstream = f["upstream"]
    sums.add(
        QUALITY,
        (upstream,),
        e.at_ms,
        fetches=1,
        received=f["received"],
        fetched=f["inserted"],
        refreshed=f["refreshed"],
        became_available=f["available"],
    )
    sums.total("received", upstream, amount=f["received"])
    sums.total("fetched", upstream, amount=f["inserted"])
    sums.total("became_available", upstream, amount=f["available"])
    for reason, n in f.get("dropped", {}).items():
        if n:
            sums.add(DROPS, (upstream, reason), e.at_ms, entries=n)
            sums.total("dropped", upstream, reason, amount=n)


def _check(sums: Sums, e: Event) -> None:
    f = e.fields
    upstream, source = f["upstream"], f["source"]
    states: dict[str, int] = f["states"]
    sums.add(
        QUALITY,
        (upstream,),
        e.at_ms,
        checked=sum(states.values()),
        check_latency_ms=f["latency_ms"],
        checks_timed=f["timed"],
    )
    for state, n in states.items():
        if n:
            sums.add(CHECKS, (upstream, source, state), e.at_ms, proxies=n)
            sums.total("checks", upstream, source, state, amount=n)
    sums.total("check_latency_ms", upstream, amount=f["latency_ms"])
    sums.total("checks_timed", upstream, amount=f["timed"])


def _expired(sums: Sums, e: Event) -> None:
    upstream, used, unused = e.fields["upstream"], e.fields["used"], e.fields["unused"]
    sums.add(QUALITY, (upstream,), e.at_ms, expired_used=used, expired_unused=unused)
    sums.total("expired", upstream, "true", amount=used)
    sums.total("expired", upstream, "false", amount=unused)


def _fetch_failed(sums: Sums, e: Event) -> None:
    sums.total("fetch_failures", e.fields["upstream"], e.fields["error"])


def _gateway_tick(sums: Sums, e: Event) -> None:
    f = e.fields
    cut_short = int(f["cut_short"])
    sums.add(GATEWAY_TICKS, (), e.at_ms, ticks=1, duration_ms=f["duration_ms"],
             cut_short=cut_short, expired=f["expired"])  # fmt: skip
    sums.total("gateway_ticks")
    sums.total("gateway_tick_duration_ms", amount=f["duration_ms"])
    sums.total("gateway_ticks_cut_short", amount=cut_short)
    sums.total("gateway_expired_leases", amount=f["expired"])


def _gateway_ownership(sums: Sums, e: Event) -> None:
    group = e.fields["group"]
    figures = {column: e.fields[column] for column in OWNERSHIP}
    sums.add(GATEWAY_ACTIVITY, (group,), e.at_ms, **figures)
    for column, n in figures.items():
        sums.total(f"gateway_{column}", group, amount=n)


def _gateway_traffic(sums: Sums, e: Event) -> None:
    f = e.fields
    group, client, upstream = f["group"], f["client"], f["upstream"]
    failed = sum(f[c] for c in FAILURES)
    figures = {c: f[c] for c in TRAFFIC}
    sums.add(GATEWAY_TRAFFIC, (group, client, upstream), e.at_ms, **figures, errors=failed)
    # /metrics: per group and upstream, no client label (exposition.py says why).
    sums.total("gateway_requests", group, upstream, amount=f["requests"])
    sums.total("gateway_tunnels", group, upstream, amount=f["tunnels"])
    sums.total("gateway_bytes", group, upstream, "up", amount=f["bytes_up"])
    sums.total("gateway_bytes", group, upstream, "down", amount=f["bytes_down"])
    for column, kind in FAILURES.items():
        sums.total("gateway_failures", group, upstream, kind, amount=f[column])


def _gateway_snapshots_refused(sums: Sums, e: Event) -> None:
    group, refused = e.fields["group"], e.fields["refused"]
    sums.add(GATEWAY_ACTIVITY, (group,), e.at_ms, snapshots_refused=refused)
    sums.total("gateway_snapshots_refused", group, amount=refused)


_HANDLERS: dict[str, Callable[[Sums, Event], None]] = {
    "fetch_failed": _fetch_failed,
    "outcome": _outcome,
    "extract": _extract,
    "fetch": _fetch,
    "check": _check,
    "expired": _expired,
    "gateway_tick": _gateway_tick,
    "gateway_ownership": _gateway_ownership,
    "gateway_traffic": _gateway_traffic,
    "gateway_snapshots_refused": _gateway_snapshots_refused,
}


def apply_events(events: Sequence[Event]) -> None:
    """Add the events to their aggregates and totals (inside the caller's transaction)."""
    sums = Sums()
    for event in events:
        _HANDLERS[event.kind](sums, event)
    sums.total("events_applied", amount=len(events))
    for table in TABLES:
        if sums.rows[table]:
            _add_rows(table, sums.rows[table])
    if sums.totals:
        _add_totals(sums.totals)


def _add_rows(table: Table, rows: dict[tuple[tuple[str, ...], int], Counter[str]]) -> None:
    keys = sorted(rows)
    arrays: list[Any] = [[dims[i] for dims, _ in keys] for i in range(len(table.dimensions))]
    arrays.append([minute / 1000 for _, minute in keys])
    arrays += [[rows[key][column] for key in keys] for column in table.values]
    select = ", ".join(
        ["unnest(%s::text[])"] * len(table.dimensions)
        + ["to_timestamp(unnest(%s::double precision[]))", "false"]
        + ["unnest(%s::bigint[])"] * len(table.values)
    )
    conflict = ", ".join((*table.dimensions, "period_start", "hourly"))
    columns = ", ".join((*table.dimensions, "period_start", "hourly", *table.values))
    updates = ", ".join(f"{c} = {table.name}.{c} + EXCLUDED.{c}" for c in table.values)
    with connection.cursor() as cursor:  # names are ours; every value is a parameter
        cursor.execute(
            f"INSERT INTO {table.name} ({columns}) SELECT {select} "
            f"ON CONFLICT ({conflict}) DO UPDATE SET {updates}",
            arrays,
        )


def _add_totals(totals: Counter[tuple[str, str]]) -> None:
    keys = sorted(totals)
    name = UsageTotal._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {name} (family, labels, value) "
            "SELECT unnest(%s::text[]), unnest(%s::text[]), unnest(%s::bigint[]) "
            f"ON CONFLICT (family, labels) DO UPDATE SET value = {name}.value + EXCLUDED.value",
            [[f for f, _ in keys], [labels for _, labels in keys], [totals[k] for k in keys]],
        )
