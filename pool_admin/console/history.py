"""The console's history: the usage aggregates as time series over a window the operator picks,
for the charts (static/console/history.js draws them with the vendored Chart.js).

Each window has a fixed step, so a series has at most ``window / step`` points (at most 180);
each query groups one aggregate table by step (and by one small fixed dimension: a drop reason,
a check result, an outcome) over the window, optionally for one upstream. Minute rows and the
hourly rows they were rolled up into are read alike: a step of an hour or more sums either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection

from activity.types import Outcome
from pool_admin.config.models import (
    ClientUsage,
    GatewayTraffic,
    UpstreamChecks,
    UpstreamDrops,
    UpstreamQuality,
)
from pool_admin.metrics.aggregates import FAILURES


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    span: timedelta
    step: timedelta


WINDOWS = {
    w.key: w
    for w in (
        Window("1h", "last hour", timedelta(hours=1), timedelta(minutes=1)),
        Window("6h", "last 6 hours", timedelta(hours=6), timedelta(minutes=5)),
        Window("24h", "last 24 hours", timedelta(hours=24), timedelta(minutes=15)),
        Window("7d", "last 7 days", timedelta(days=7), timedelta(hours=1)),
        Window("30d", "last 30 days", timedelta(days=30), timedelta(hours=4)),
    )
}
DEFAULT_WINDOW = "24h"
#: Series name -> the UpstreamQuality column it sums.
QUALITY_SUMS = {
    "extracted": "extracted",
    "fetched": "fetched",
    "available": "became_available",
    "used": "expired_used",
    "unused": "expired_unused",
    "latency": "check_latency_ms",
    "timed": "checks_timed",
    **{o.value: o.value for o in Outcome},
}
#: Series name -> the GatewayTraffic column it sums (every group and client).
GATEWAY_SUMS = {
    "requests": "requests",
    "tunnels": "tunnels",
    "up": "bytes_up",
    "down": "bytes_down",
    **{kind: column for column, kind in FAILURES.items()},
}


def _buckets(window: Window, now: datetime) -> list[datetime]:
    step = int(window.step.total_seconds())
    end = int(now.timestamp()) // step * step
    start = end - int(window.span.total_seconds()) + step
    return [datetime.fromtimestamp(t, UTC) for t in range(start, end + 1, step)]


def _grouped(
    table: str,
    sums: dict[str, str],
    window: Window,
    since: datetime,
    upstream: str | None,
    by: str | None = None,
) -> list[tuple[Any, ...]]:
    """(bucket epoch s, [by value], sum...) rows of one table over the window."""
    step = int(window.step.total_seconds())
    bucket = f"floor(extract(epoch from period_start) / {step}) * {step}"
    columns = ", ".join(f"sum({expression})" for expression in sums.values())
    group = f"{bucket}" + (f", {by}" if by else "")
    where = "period_start >= %s" + (" AND upstream = %s" if upstream else "")
    params: list[Any] = [since] + ([upstream] if upstream else [])
    with connection.cursor() as cursor:  # names are ours; every value is a parameter
        cursor.execute(
            f"SELECT {bucket} AS b{', ' + by if by else ''}, {columns} FROM {table} "  # noqa: S608
            f"WHERE {where} GROUP BY {group} ORDER BY 1",
            params,
        )
        return list(cursor.fetchall())


def history(window_key: str, upstream: str | None, now: datetime | None = None) -> dict[str, Any]:
    """The charts' data: labels (ISO times) and, per chart, named series of one value a step."""
    window = WINDOWS[window_key]
    now = now or datetime.now(UTC)
    buckets = _buckets(window, now)
    since = buckets[0]
    index = {int(b.timestamp()): i for i, b in enumerate(buckets)}

    def series(rows: list[tuple[Any, ...]], names: list[str]) -> dict[str, list[int]]:
        out = {name: [0] * len(buckets) for name in names}
        for row in rows:
            i = index.get(int(row[0]))
            if i is None:
                continue
            for name, value in zip(names, row[1:], strict=True):
                out[name][i] += int(value or 0)
        return out

    def by_dimension(rows: list[tuple[Any, ...]]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for b, key, value in rows:
            i = index.get(int(b))
            if i is not None:
                out.setdefault(str(key), [0] * len(buckets))[i] += int(value or 0)
        return dict(sorted(out.items()))

    quality = _grouped(UpstreamQuality._meta.db_table, QUALITY_SUMS, window, since, upstream)
    figures = series(quality, list(QUALITY_SUMS))
    calls = series(
        _grouped(ClientUsage._meta.db_table, {"calls": "calls"}, window, since, None), ["calls"]
    )
    gateway = series(
        _grouped(GatewayTraffic._meta.db_table, GATEWAY_SUMS, window, since, upstream),
        list(GATEWAY_SUMS),
    )
    latency = [
        round(lat / timed) if timed else None
        for lat, timed in zip(figures["latency"], figures["timed"], strict=True)
    ]
    drops = by_dimension(
        _grouped(
            UpstreamDrops._meta.db_table, {"n": "entries"}, window, since, upstream, by="reason"
        )
    )
    checks = by_dimension(
        _grouped(
            UpstreamChecks._meta.db_table, {"n": "proxies"}, window, since, upstream, by="result"
        )
    )
    return {
        "window": window.key,
        "step_s": int(window.step.total_seconds()),
        "labels": [b.isoformat().replace("+00:00", "Z") for b in buckets],
        "charts": [
            {
                "id": "extracts",
                "title": "Extracted proxies and extract calls",
                "series": {
                    "proxies extracted": figures["extracted"],
                    **({"extract calls (all upstreams)": calls["calls"]} if not upstream else {}),
                },
            },
            {
                "id": "fetched",
                "title": "Fetched and made available",
                "series": {"fetched": figures["fetched"], "became available": figures["available"]},
            },
            {
                "id": "dropped",
                "title": "Entries dropped, by reason",
                "stacked": True,
                "series": drops,
            },
            {
                "id": "outcomes",
                "title": "Client outcome reports",
                "stacked": True,
                "series": {o.value: figures[o.value] for o in Outcome},
            },
            {
                "id": "checks",
                "title": "Health checks, by result",
                "stacked": True,
                "series": checks,
            },
            {"id": "latency", "title": "Mean check latency (ms)", "series": {"ms": latency}},
            {
                "id": "expired",
                "title": "Expired: used and never used",
                "stacked": True,
                "series": {"never used": figures["unused"], "used": figures["used"]},
            },
            {
                "id": "gateway",
                "title": "Gateway requests and tunnels",
                "series": {"requests": gateway["requests"], "tunnels": gateway["tunnels"]},
            },
            {
                "id": "gateway_bytes",
                "title": "Gateway bytes, up (to the proxies) and down",
                "series": {"up": gateway["up"], "down": gateway["down"]},
            },
            {
                "id": "gateway_failures",
                "title": "Gateway failures, by kind",
                "stacked": True,
                "series": {kind: gateway[kind] for kind in FAILURES.values()},
            },
        ],
    }
