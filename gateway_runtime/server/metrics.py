"""The worker's own small HTTP endpoint (loopback by default): ``GET /metrics`` (Prometheus
text), ``GET /ready`` (200 while it serves a snapshot, 503 while it fails closed) and ``GET
/healthz`` (200 while the process runs).

The figures are read when scraped from the plain counters the request path keeps (no lock, no
prometheus-client call per request). Labels are bounded: answer statuses, failure kinds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway_runtime.server.gateway import Gateway

MAX_REQUEST_HEAD = 4 * 1024


class _WorkerCollector(Collector):
    def __init__(self, gateway: Gateway, session: Callable[[], dict[str, float]]) -> None:
        self._gateway = gateway
        self._session = session

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        stats, store = self._gateway.stats, self._gateway.store
        yield GaugeMetricFamily(
            "proxypool_worker_connections", "Client connections open.", stats.connections_open
        )
        yield CounterMetricFamily(
            "proxypool_worker_connections_accepted",
            "Client connections accepted.",
            stats.connections_accepted,
        )
        yield CounterMetricFamily(
            "proxypool_worker_connections_refused",
            "Client connections refused at the worker's connection limit.",
            stats.connections_refused,
        )
        yield CounterMetricFamily(
            "proxypool_worker_requests", "Plain HTTP requests forwarded.", stats.requests
        )
        yield CounterMetricFamily(
            "proxypool_worker_tunnels", "Tunnels opened (CONNECT and SOCKS5).", stats.tunnels
        )
        answers = CounterMetricFamily(
            "proxypool_worker_answers",
            "Answers to clients by status (200 for a tunnel).",
            labels=["status"],
        )
        for status, count in sorted(stats.answers.items()):
            answers.add_metric([str(status)], count)
        yield answers
        failures = CounterMetricFamily(
            "proxypool_worker_upstream_failures",
            "Upstream proxies that failed a request or tunnel, by kind.",
            labels=["kind"],
        )
        for kind, count in sorted(stats.upstream_failures.items()):
            failures.add_metric([str(kind)], count)
        yield failures
        yield CounterMetricFamily(
            "proxypool_worker_retried_on_fresh_connection",
            "Requests sent again because a kept upstream connection had been dropped.",
            stats.retried_on_fresh_connection,
        )
        yield GaugeMetricFamily(
            "proxypool_worker_kept_upstream_connections",
            "Idle upstream connections kept for the next request.",
            len(self._gateway.kept),
        )
        view = store.view()
        yield GaugeMetricFamily(
            "proxypool_worker_serving",
            "1 while serving a snapshot, 0 while failing closed.",
            int(view is not None),
        )
        served = store.served
        yield GaugeMetricFamily(
            "proxypool_worker_snapshot_proxies",
            "Proxies in the snapshot served.",
            0 if served is None else len(served.snapshot.proxies),
        )
        yield GaugeMetricFamily(
            "proxypool_worker_snapshot_version",
            "Version of the snapshot served.",
            0 if served is None else served.snapshot.version,
        )
        confirmed = store.confirmed_at
        age = 0.0 if confirmed is None else (datetime.now(UTC) - confirmed).total_seconds()
        yield GaugeMetricFamily(
            "proxypool_worker_snapshot_age_seconds",
            "Seconds since the control plane last confirmed the snapshot.",
            age,
        )
        yield GaugeMetricFamily(
            "proxypool_worker_draining_proxies",
            "Proxies out of the snapshot still busy.",
            len(store.draining),
        )
        yield CounterMetricFamily(
            "proxypool_worker_snapshot_refusals",
            "Snapshots the worker refused to install.",
            store.refusals,
        )
        for name, value in self._session().items():
            yield GaugeMetricFamily(
                f"proxypool_worker_control_{name}", f"Control-plane client: {name}.", value
            )


class MetricsServer:
    def __init__(self, gateway: Gateway, session: Callable[[], dict[str, float]]) -> None:
        self._gateway = gateway
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_WorkerCollector(gateway, session))

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            if path == b"/metrics":
                body, status = generate_latest(self._registry), b"200 OK"
                kind = b"text/plain; version=0.0.4; charset=utf-8"
            elif path in (b"/ready", b"/healthz"):
                ok = path == b"/healthz" or self._gateway.store.view() is not None
                body = b"ready\n" if ok else b"no current snapshot\n"
                status, kind = (b"200 OK" if ok else b"503 Service Unavailable"), b"text/plain"
            else:
                body, status, kind = b"not found\n", b"404 Not Found", b"text/plain"
            head = b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n" % (
                status,
                kind,
                len(body),
            )
            writer.write(head + b"Connection: close\r\n\r\n" + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                writer.close()
