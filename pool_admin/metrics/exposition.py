"""``GET /metrics``: the pool's and the usage pipeline's figures in Prometheus' text format.

Families (``../shared/research/operations.md`` §6.2: ``proxypool_`` prefix, base units, no
per-proxy, per-IP or per-session label; an upstream is a configuration name, bounded by it):

* ``proxypool_upstream_unextracted_proxies{upstream}``, ``proxypool_upstream_managed_proxies``,
  ``proxypool_upstream_available_slots``, ``proxypool_upstream_gateway_held_proxies``,
  ``proxypool_upstream_gateway_capacity`` (connections): the pool's exact per-upstream reads
  (the last four from one ``upstream_inventory``), for each configured upstream
  (``proxypool_upstream_read_errors`` counts the upstreams whose read failed this time: a
  bounded read over its budget, or Redis unreachable).
* ``proxypool_usage_stream_entries``, ``..._pending_entries`` (delivered, not acknowledged),
  ``..._lag_entries`` (not yet delivered), ``proxypool_usage_dead_letter_entries``: the usage
  stream's state, read from its Redis.
* ``proxypool_usage_events_dropped_total``: events producers could not put on the stream,
  summed over every process (kept in the stream's Redis once it answers again).
* The pipeline's counters, from the totals the consumer adds to with each batch
  (``UsageTotal``; never rolled up or pruned, so they only grow): events applied; outcome
  reports, extract calls and their duration, proxies extracted and their time from fetch to
  first use, entries received, proxies fetched and made available, entries dropped by reason,
  checks by source and result and their latency, proxies expired used or unused, fetches
  failed by kind (the error's code); and the gateway's: ownership ticks (their duration, those
  cut short, the leases they expired), what they did per worker group (proxies assigned and
  released, leases renewed, drains begun, candidates refused), the snapshots each group's
  workers refused, and what they carried per upstream (requests, tunnels, bytes by direction,
  failures by kind). Labels: upstream, worker group, and small fixed sets (outcome, reason,
  source, result, used, direction, kind); no client, worker or proxy label (``ClientUsage``
  and ``GatewayTraffic`` in PostgreSQL have the client).
  At most ``MAX_TOTALS`` rows are read; past that ``proxypool_usage_totals_truncated`` is 1
  and the counters shown are incomplete.
* ``proxypool_open_alerts{kind}``: the alerts open now, every kind (one grouped count).

Every figure is read at most once per ``CACHE_S`` whatever the scrape rate, with a bounded
number of reads (one per configured upstream, at most ``MAX_UPSTREAMS`` of them: past that
``proxypool_upstreams_truncated`` is 1; four for the stream, one for the totals). Who
may scrape is ``settings.METRICS_ALLOWED_NETWORKS`` (default loopback only); anyone else gets
a 403.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import redis
from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import CollectorRegistry

from activity import redis_url
from activity.errors import ActivityError
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import Alert, Upstream, UsageTotal
from pool_admin.metrics.group import lost_total
from pool_admin.metrics.stream import dropped_key

CACHE_S = 5.0
#: Most totals rows one scrape reads (families x upstreams x their small label sets).
MAX_TOTALS = 20_000
#: Most upstreams whose pool figures one scrape reads (two bounded pool reads each).
MAX_UPSTREAMS = 500

_lock = threading.Lock()
_cached: tuple[float, bytes] | None = None


def _pool_families() -> Iterator[Metric]:
    unextracted = GaugeMetricFamily(
        "proxypool_upstream_unextracted_proxies",
        "Proxies of the upstream not handed out yet (pool inventory).",
        labels=["upstream"],
    )
    managed = GaugeMetricFamily(
        "proxypool_upstream_managed_proxies",
        "Proxies the pool manages for the upstream (fetched, checking, "
        "available, suspect, draining).",
        labels=["upstream"],
    )
    slots = GaugeMetricFamily(
        "proxypool_upstream_available_slots",
        "Free gateway slots of the upstream's available proxies.",
        labels=["upstream"],
    )
    held = GaugeMetricFamily(
        "proxypool_upstream_gateway_held_proxies",
        "Available proxies of the upstream gateway workers hold, not draining.",
        labels=["upstream"],
    )
    capacity = GaugeMetricFamily(
        "proxypool_upstream_gateway_capacity",
        "Connections the gateway's held proxies of the upstream offer (their maximum "
        "concurrency summed, busy or not).",
        labels=["upstream"],
    )
    errors = 0
    pool = get_pool()
    names = list(
        Upstream.objects.order_by("name").values_list("name", flat=True)[: MAX_UPSTREAMS + 1]
    )
    for name in names[:MAX_UPSTREAMS]:
        try:
            inventory = pool.upstream_inventory(name)
            left = pool.inventory(name)
        except ActivityError:
            errors += 1
            continue
        unextracted.add_metric([name], left)
        managed.add_metric([name], inventory.managed)
        slots.add_metric([name], inventory.available_slots)
        held.add_metric([name], inventory.gateway_held)
        capacity.add_metric([name], inventory.gateway_capacity)
    yield from (unextracted, managed, slots, held, capacity)
    yield GaugeMetricFamily(
        "proxypool_upstream_read_errors",
        "Configured upstreams whose figures could not be read this time.",
        value=errors,
    )
    yield GaugeMetricFamily(
        "proxypool_upstreams_truncated",
        f"1 if more than {MAX_UPSTREAMS} upstreams are configured: the "
        "pool figures of those past it (by name) are not shown.",
        value=int(len(names) > MAX_UPSTREAMS),
    )


STREAM_UP = "proxypool_usage_stream_up"
STREAM_UP_HELP = "1 when the usage stream's Redis answered this scrape, else 0."


def _stream_families() -> Iterator[Metric]:
    client = redis_url.connect(
        settings.METRICS_REDIS_URL, socket_timeout=2, socket_connect_timeout=1
    )
    try:
        entries: Any = client.xlen(settings.METRICS_STREAM)
        groups: Any = client.xinfo_groups(settings.METRICS_STREAM) if entries else []
        dead: Any = client.xlen(settings.METRICS_DEAD_LETTER)
        dropped = int(client.get(dropped_key()) or 0)
        lost = lost_total(client, settings.METRICS_STREAM)
    except redis.RedisError:
        # The stream's Redis is not answering: its families are absent this time, and "up"
        # says so (an alert on 0 is simpler than one on a family gone missing).
        yield GaugeMetricFamily(STREAM_UP, STREAM_UP_HELP, value=0)
        return
    finally:
        client.close()
    yield GaugeMetricFamily(STREAM_UP, STREAM_UP_HELP, value=1)
    group = next((g for g in groups if g["name"].decode() == settings.METRICS_GROUP), None)
    yield GaugeMetricFamily(
        "proxypool_usage_stream_entries",
        "Entries the usage stream holds (bounded by MAXLEN ~).",
        value=int(entries),
    )
    if group is not None:
        yield GaugeMetricFamily(
            "proxypool_usage_stream_pending_entries",
            "Entries delivered to a consumer and not acknowledged yet.",
            value=int(group["pending"]),
        )
        if group.get("lag") is not None:  # Redis says when it cannot tell: absent then
            yield GaugeMetricFamily(
                "proxypool_usage_stream_lag_entries",
                "Entries not delivered to any consumer yet.",
                value=int(group["lag"]),
            )
    yield GaugeMetricFamily(
        "proxypool_usage_dead_letter_entries",
        "Entries no aggregate could use, kept with their reasons.",
        value=int(dead),
    )
    yield CounterMetricFamily(
        "proxypool_usage_events_dropped",
        "Usage events producers could not put on the stream.",
        value=dropped,
    )
    yield CounterMetricFamily(
        "proxypool_usage_stream_entries_lost",
        "Stream entries trimmed (MAXLEN) before a consumer applied them: "
        "the consumers were behind by more than the stream holds.",
        value=lost,
    )


#: UsageTotal family -> (metric name, help, label names): the plain counters.
_COUNTERS: dict[str, tuple[str, str, list[str]]] = {
    "events_applied": (
        "proxypool_usage_events_applied",
        "Usage events the consumers applied to the aggregates (each once).",
        [],
    ),
    "outcomes": (
        "proxypool_outcome_reports",
        "Outcome reports of extracted proxies.",
        ["upstream", "outcome"],
    ),
    "extract_calls": (
        "proxypool_extract_calls",
        "Extract calls (API and command) by outcome: ok, or the refusal's problem code.",
        ["outcome"],
    ),
    "extracted": ("proxypool_extracted_proxies", "Proxies handed to API clients.", ["upstream"]),
    "received": (
        "proxypool_received_entries",
        "Entries the provider's responses listed.",
        ["upstream"],
    ),
    "fetched": ("proxypool_fetched_proxies", "New proxies the pool took in.", ["upstream"]),
    "became_available": (
        "proxypool_became_available_proxies",
        "Fetched proxies their intake check (or a trusted provider) made available.",
        ["upstream"],
    ),
    "dropped": (
        "proxypool_dropped_entries",
        "Entries of the provider's responses not taken, by reason.",
        ["upstream", "reason"],
    ),
    "checks": (
        "proxypool_checks",
        "Health checks by source (intake, recheck) and the state they gave.",
        ["upstream", "source", "result"],
    ),
    "expired": (
        "proxypool_expired_proxies",
        "Records removed at their hard expiry, used "
        "(extracted or assigned) or not (paid for and wasted).",
        ["upstream", "used"],
    ),
    "fetch_failures": (
        "proxypool_fetch_failures",
        "Fetches that failed, by kind: the error's "
        "code (fetch_failed, http_status, vendor_error, malformed_response, "
        "our_side...).",
        ["upstream", "kind"],
    ),
    # The gateway's (pool_admin/metrics/gateway_events.py): per worker group and upstream,
    # never per worker or proxy.
    "gateway_ticks_cut_short": (
        "proxypool_gateway_ticks_cut_short",
        "Ownership ticks a bound or a lost lease stopped short (the next finishes).",
        [],
    ),
    "gateway_expired_leases": (
        "proxypool_gateway_expired_leases",
        "Lapsed gateway leases the ownership ticks expired (every group's).",
        [],
    ),
    "gateway_assigned": (
        "proxypool_gateway_assigned_proxies",
        "Proxies the ownership ticks assigned to the group's workers.",
        ["group"],
    ),
    "gateway_renewed": (
        "proxypool_gateway_renewed_leases",
        "Leases of the group's workers the ownership ticks renewed.",
        ["group"],
    ),
    "gateway_drains_begun": (
        "proxypool_gateway_drains_begun",
        "Drains the ownership ticks began for the group's workers.",
        ["group"],
    ),
    "gateway_released": (
        "proxypool_gateway_released_proxies",
        "Drained proxies the ownership ticks released (the worker reported them idle).",
        ["group"],
    ),
    "gateway_refused": (
        "proxypool_gateway_refused_assigns",
        "Candidates another client or worker took between the tick's read and its assign.",
        ["group"],
    ),
    "gateway_requests": (
        "proxypool_gateway_requests",
        "Requests the group's workers carried through the upstream's proxies.",
        ["group", "upstream"],
    ),
    "gateway_bytes": (
        "proxypool_gateway_bytes",
        "Bytes the group's workers sent to (up) and received from (down) the upstream's proxies.",
        ["group", "upstream", "direction"],
    ),
    "gateway_tunnels": (
        "proxypool_gateway_tunnels",
        "Tunnels (CONNECT, SOCKS5) the group's workers opened through the upstream's proxies.",
        ["group", "upstream"],
    ),
    "gateway_failures": (
        "proxypool_gateway_failures",
        "Requests and tunnels through the upstream's proxies that failed, as the group's "
        "workers counted them, by kind: connect (the proxy unreachable or refusing the login), "
        "timeout, upstream (the proxy's error for the target), closed (broken mid-transfer).",
        ["group", "upstream", "kind"],
    ),
    "gateway_snapshots_refused": (
        "proxypool_gateway_refused_snapshots",
        "Snapshots the group's workers refused (a draining registry full: the older view kept).",
        ["group"],
    ),
}


def _usage_families() -> Iterator[Metric]:
    rows = list(
        UsageTotal.objects.order_by("family", "labels").values_list("family", "labels", "value")[
            : MAX_TOTALS + 1
        ]
    )
    yield GaugeMetricFamily(
        "proxypool_usage_totals_truncated",
        "1 when the pipeline's counters were too many to read at once.",
        value=int(len(rows) > MAX_TOTALS),
    )
    totals: dict[str, dict[tuple[str, ...], int]] = {}
    for family, joined, value in rows[:MAX_TOTALS]:
        totals.setdefault(family, {})[tuple(joined.split("|")) if joined else ()] = value
    for family, (name, help_text, label_names) in _COUNTERS.items():
        counter = CounterMetricFamily(name, help_text, labels=label_names)
        for labels, value in totals.get(family, {}).items():
            if len(labels) == len(label_names):
                counter.add_metric(list(labels), value)
        yield counter
    calls = sum(totals.get("extract_calls", {}).values())
    duration = SummaryMetricFamily(
        "proxypool_extract_duration_seconds", "Time extract calls spent in the pool."
    )
    duration.add_metric([], calls, totals.get("extract_duration_ms", {}).get((), 0) / 1000)
    yield duration
    yield _summary(
        totals,
        "proxypool_time_to_first_use_seconds",
        "Time from a proxy's fetch to its extract.",
        "extracted",
        "first_use_ms",
    )
    yield _summary(
        totals,
        "proxypool_check_latency_seconds",
        "Measured latency of health checks.",
        "checks_timed",
        "check_latency_ms",
    )
    yield _summary(
        totals,
        "proxypool_gateway_tick_duration_seconds",
        "Time the ownership ticks that ran took (one at a time, every 2 s).",
        "gateway_ticks",
        "gateway_tick_duration_ms",
        labels=(),
    )


def _alert_families() -> Iterator[Metric]:
    """Open alerts by kind, every kind (0 too): one grouped count, bounded by the kinds."""
    open_now = Alert.objects.filter(opened_at__isnull=False, closed_at__isnull=True)
    opened = dict(open_now.values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
    family = GaugeMetricFamily(
        "proxypool_open_alerts", "Alerts open now, by kind.", labels=["kind"]
    )
    for kind in Alert.Kind:
        family.add_metric([kind.value], opened.get(kind.value, 0))
    yield family


def _summary(
    totals: dict[str, dict[tuple[str, ...], int]],
    name: str,
    help_text: str,
    count: str,
    sum_ms: str,
    labels: tuple[str, ...] = ("upstream",),
) -> Metric:
    """A summary (count and sum, no quantiles) from two totals families, per upstream unless
    told otherwise."""
    summary = SummaryMetricFamily(name, help_text, labels=list(labels))
    sums = totals.get(sum_ms, {})
    for values, n in sorted(totals.get(count, {}).items()):
        if len(values) == len(labels):
            summary.add_metric(list(values), n, sums.get(values, 0) / 1000)
    return summary


class _Collector:
    def collect(self) -> Iterable[Metric]:
        yield from _pool_families()
        yield from _stream_families()
        yield from _usage_families()
        yield from _alert_families()


def exposition() -> bytes:
    """The text format, read afresh at most once per CACHE_S."""
    global _cached
    with _lock:
        if _cached is not None and time.monotonic() - _cached[0] < CACHE_S:
            return _cached[1]
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector())
        body = generate_latest(registry)
        _cached = (time.monotonic(), body)
        return body


def clear_cache() -> None:
    global _cached
    with _lock:
        _cached = None


def _allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net) for net in settings.METRICS_ALLOWED_NETWORKS)


def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET"})
    if not _allowed(request.META.get("REMOTE_ADDR", "")):
        return HttpResponse(
            "metrics are not served to this address\n", status=403, content_type="text/plain"
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
