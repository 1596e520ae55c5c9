"""``GET /metrics``: the pool's and the usage pipeline's figures in Prometheus' text format.

Families (``../shared/research/operations.md`` §6.2: ``proxypool_`` prefix, base units, no
per-proxy, per-IP or per-session label; an upstream is a configuration name, bounded by it):

* ``proxypool_upstream_unextracted_proxies{upstream}``, ``proxypool_upstream_managed_proxies``,
  ``proxypool_upstream_available_slots``: the pool's exact per-upstream reads, for each
  configured upstream (``proxypool_upstream_read_errors`` counts the upstreams whose read
  failed this time: a bounded read over its budget, or Redis unreachable).
* ``proxypool_usage_stream_entries``, ``..._pending_entries`` (delivered, not acknowledged),
  ``..._lag_entries`` (not yet delivered), ``proxypool_usage_dead_letter_entries``: the usage
  stream's state, read from its Redis.
* ``proxypool_usage_events_dropped_total``: events producers could not put on the stream,
  summed over every process (kept in the stream's Redis once it answers again).

Every figure is read at most once per ``CACHE_S`` whatever the scrape rate, with a bounded
number of reads (one per configured upstream, four for the stream). Who may scrape is
``settings.METRICS_ALLOWED_NETWORKS`` (default loopback only); anyone else gets a 403.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from activity.errors import ActivityError
from pool_admin.config.models import Upstream
from pool_admin.metrics.stream import dropped_key
from pool_admin.pool import get_pool

CACHE_S = 5.0

_lock = threading.Lock()
_cached: tuple[float, bytes] | None = None


def _pool_families() -> Iterator[Metric]:
    unextracted = GaugeMetricFamily("proxypool_upstream_unextracted_proxies",
                                    "Proxies of the upstream not handed out yet (pool inventory).",
                                    labels=["upstream"])  # fmt: skip
    managed = GaugeMetricFamily("proxypool_upstream_managed_proxies",
                                "Proxies the pool manages for the upstream (fetched, checking, "
                                "available, suspect, draining).", labels=["upstream"])  # fmt: skip
    slots = GaugeMetricFamily("proxypool_upstream_available_slots",
                              "Free gateway slots of the upstream's available proxies.",
                              labels=["upstream"])  # fmt: skip
    errors = 0
    pool = get_pool()
    for name in Upstream.objects.order_by("name").values_list("name", flat=True):
        try:
            inventory = pool.upstream_inventory(name)
            left = pool.inventory(name)
        except ActivityError:
            errors += 1
            continue
        unextracted.add_metric([name], left)
        managed.add_metric([name], inventory.managed)
        slots.add_metric([name], inventory.available_slots)
    yield from (unextracted, managed, slots)
    yield GaugeMetricFamily("proxypool_upstream_read_errors",
                            "Configured upstreams whose figures could not be read this time.",
                            value=errors)  # fmt: skip


def _stream_families() -> Iterator[Metric]:
    client = redis.Redis.from_url(settings.METRICS_REDIS_URL, socket_timeout=2,
                                  socket_connect_timeout=1)  # fmt: skip
    try:
        entries: Any = client.xlen(settings.METRICS_STREAM)
        groups: Any = client.xinfo_groups(settings.METRICS_STREAM) if entries else []
        dead: Any = client.xlen(settings.METRICS_DEAD_LETTER)
        dropped = int(client.get(dropped_key()) or 0)
    except redis.RedisError:
        return  # the stream's Redis is not answering: its families are absent this time
    finally:
        client.close()
    group = next((g for g in groups if g["name"].decode() == settings.METRICS_GROUP), None)
    yield GaugeMetricFamily("proxypool_usage_stream_entries",
                            "Entries the usage stream holds (bounded by MAXLEN ~).",
                            value=int(entries))  # fmt: skip
    if group is not None:
        yield GaugeMetricFamily("proxypool_usage_stream_pending_entries",
                                "Entries delivered to a consumer and not acknowledged yet.",
                                value=int(group["pending"]))  # fmt: skip
        yield GaugeMetricFamily("proxypool_usage_stream_lag_entries",
                                "Entries not delivered to any consumer yet.",
                                value=int(group.get("lag") or 0))  # fmt: skip
    yield GaugeMetricFamily("proxypool_usage_dead_letter_entries",
                            "Entries no aggregate could use, kept with their reasons.",
                            value=int(dead))  # fmt: skip
    yield CounterMetricFamily("proxypool_usage_events_dropped",
                              "Usage events producers could not put on the stream.",
                              value=dropped)  # fmt: skip


class _Collector:
    def collect(self) -> Iterable[Metric]:
        yield from _pool_families()
        yield from _stream_families()


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
        return HttpResponse("metrics are not served to this address\n", status=403,
                            content_type="text/plain")  # fmt: skip
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
