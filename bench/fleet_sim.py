"""The simulated side of bench/fleet.py: gateway workers that speak the control API through the
real worker's ``ControlClient`` (sessions, conditional snapshot fetches, ACKs, reports, at the
intervals the session's answer gives), with a fake traffic source in place of a proxy server,
many in one asyncio process; and the steady extract load through the web server.

Every call's latency (to the answer's head) and status is kept by kind in ``CallStats``, each
kind's samples bounded; the ``ControlClient``'s own timeout (10 s) bounds every call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from gateway_runtime.control_client import BASE_PATH, ControlClient
from gateway_runtime.snapshot_store import SnapshotStore, Ticket
from gateway_runtime.traffic import TrafficCounter

#: Latency samples kept per kind within a window (the counts go on past it).
MAX_SAMPLES = 200_000
#: Extracts in flight at once; a tick of the open-loop load that finds this many waiting skips
#: its send and counts it, so a slow server shows as skipped sends, not as a growing queue.
MAX_EXTRACTS_IN_FLIGHT = 64
#: How often a simulated worker changes which of its proxies are busy (its report interval).
CHURN_S = 5.0
#: Kinds of the control API's calls, in table order.
CONTROL_KINDS = ("session", "snapshot 304", "snapshot full", "ack", "report")


@dataclass
class CallStats:
    """Calls by kind since the last ``reset``: how many, their latencies (bounded), errors."""

    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    latencies: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    errors: collections.Counter[str] = field(default_factory=collections.Counter)

    def record(self, kind: str, seconds: float, status: int) -> None:
        self.counts[kind] += 1
        samples = self.latencies[kind]
        if len(samples) < MAX_SAMPLES:
            samples.append(seconds)
        if status >= 400:
            self.errors[f"{kind} {status}"] += 1

    def failed(self, kind: str, reason: str) -> None:
        self.counts[kind] += 1
        self.errors[f"{kind} {reason}"] += 1

    def reset(self) -> None:
        self.counts.clear()
        self.latencies.clear()
        self.errors.clear()


def percentile(samples: Sequence[float], share: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def control_kind(request: httpx.Request, status: int) -> str:
    path = request.url.path.removeprefix(BASE_PATH)
    if path == "/sessions":
        return "session"
    if path == "/snapshot":
        return "snapshot 304" if status == 304 else "snapshot full"
    if path == "/snapshot/ack":
        return "ack"
    if path == "/reports":
        return "report"
    return path


class TimedTransport(httpx.AsyncBaseTransport):
    """One worker's connections (as a real worker has its own), each call timed into ``stats``."""

    def __init__(self, stats: CallStats) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._stats = stats

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        began = time.perf_counter()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.HTTPError as exc:
            self._stats.failed(control_kind(request, 0), type(exc).__name__)
            raise
        kind = control_kind(request, response.status_code)
        self._stats.record(kind, time.perf_counter() - began, response.status_code)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class SimWorker:
    """One gateway worker without a proxy server: its ``ControlClient`` against the control
    plane, and every ``CHURN_S`` a new set of busy proxies (``busy_share`` of those it holds, one
    connection each) and some requests counted for a few (gateway client, upstream) pairs, so
    its reports carry entries and traffic as a loaded worker's do."""

    def __init__(
        self,
        base_url: str,
        token: str,
        stats: CallStats,
        clients: Sequence[str],
        busy_share: float,
    ) -> None:
        self.store = SnapshotStore(lambda: datetime.now(UTC))
        self.traffic = TrafficCounter()
        self.control = ControlClient(
            base_url, token, self.store, transport=TimedTransport(stats), traffic=self.traffic
        )
        self._clients = clients
        self._busy_share = busy_share
        self._tickets: list[Ticket] = []
        self._rng = random.Random(token[-8:])  # a load's shape, not a secret

    def held(self) -> int:
        view = self.store.view()
        return len(view.proxies) if view is not None else 0

    async def run(self, stop: asyncio.Event, delay: float) -> None:
        """Start after ``delay`` (a fleet's workers do not start in step), then run until
        ``stop``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
        churn = asyncio.create_task(self._churn_loop(stop))
        try:
            await self.control.run(stop)
        finally:
            await churn
            await self.control.close()

    async def _churn_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._churn()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=CHURN_S)

    def _churn(self) -> None:
        for held in self._tickets:
            self.store.release(held, active=True)
        self._tickets.clear()
        view = self.store.view()
        holds = self.store.holds(view) if view is not None else None
        if not holds:
            return
        now = datetime.now(UTC)
        busy = self._rng.sample(list(holds.values()), int(len(holds) * self._busy_share))
        for hold in busy:
            ticket = self.store.take(hold, now)
            if ticket is not None:
                self.store.activate(ticket)
                self._tickets.append(ticket)
        for hold in busy[:3]:
            record = self.traffic.record(self._rng.choice(self._clients), hold.proxy.upstream)
            record.requests += self._rng.randint(100, 5_000)
            record.bytes_down += self._rng.randint(10**5, 10**7)


async def extract_load(
    base_url: str, api_key: str, rate: float, stats: CallStats, stop: asyncio.Event
) -> None:
    """``rate`` extracts a second of one proxy each, open loop, at most
    ``MAX_EXTRACTS_IN_FLIGHT`` waiting (past it a send is skipped and counted)."""
    if rate <= 0:
        return
    limits = httpx.Limits(max_connections=MAX_EXTRACTS_IN_FLIGHT)
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, limits=limits, timeout=10.0
    ) as http:
        in_flight: set[asyncio.Task[None]] = set()

        async def one() -> None:
            began = time.perf_counter()
            try:
                answer = await http.post("/api/v1/extract", json={"count": 1, "mode": "partial"})
            except httpx.HTTPError as exc:
                stats.failed("extract", type(exc).__name__)
                return
            stats.record("extract", time.perf_counter() - began, answer.status_code)

        loop = asyncio.get_running_loop()
        due = loop.time()
        while not stop.is_set():
            if len(in_flight) >= MAX_EXTRACTS_IN_FLIGHT:
                stats.failed("extract", "skipped")
            else:
                task = asyncio.create_task(one())
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            due += 1 / rate
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(0.0, due - loop.time()))
        if in_flight:
            await asyncio.wait(in_flight, timeout=15)
