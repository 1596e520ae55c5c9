"""The gateway worker's request path on one core (``bench/gateway.py --part select``): a
connection's proxy chosen and reserved (``Selector.choose``), then activated and released, with
10,000 proxies in the served snapshot.

The snapshot: 10,000 proxies over 10 upstreams and 20 regions, a quarter SOCKS5, a few carriers,
``max_concurrency`` 8. Before measuring, about 45% of all slots are held (activated and never
released, a random number per proxy, one proxy in ten full) so that choices meet uneven load and
full proxies, as a busy worker's do. Cases:

* ``plain``: a client with no restrictions, a username with no parameters (rotation);
* ``region``: the same client asking for one region (1 in 20 of the proxies);
* ``sticky hit``: one sticky session, every call after the first a hit;
* ``restricted``: a client allowed 4 upstreams, 5 regions and HTTP only, no parameters.

An operation is ``choose`` (which reserves) + ``activate`` + ``release``, as the worker does per
connection; the clock is the real one (``datetime.now(UTC)``), as the worker's. Each case runs
for about ``seconds`` five times; ops/s is printed by this process's CPU time (the median and
the slowest of the runs: one core's rate even on a shared machine) and by wall time.
``store.view()`` (the worker calls it once per connection too) is timed on its own.
"""

from __future__ import annotations

import random
import statistics
import time
import timeit
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from gateway_runtime.selection import Chosen, Selector
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.username import ClientRequest
from gateway_runtime.wire import GatewayClient, Snapshot, SnapshotProxy

PROXIES = 10_000
MAXIMUM = 8
REGIONS = ("us", "de", "gb", "fr", "nl", "jp", "br", "ca", "au", "in",
           "es", "it", "pl", "se", "mx", "kr", "sg", "za", "tr", "ar")  # fmt: skip
CARRIERS = (None, None, "att", "vodafone", "telekom")
RUNS = 5


def _proxy(i: int, now: datetime) -> SnapshotProxy:
    return SnapshotProxy(
        proxy_id=f"p{i:05d}", host=f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",
        port=8080, protocol="socks5" if i % 4 == 3 else "http",
        region=REGIONS[i % len(REGIONS)], carrier=CARRIERS[i % len(CARRIERS)],
        upstream=f"u{i % 10}", labels={}, max_concurrency=MAXIMUM, assignment_epoch=1,
        lease_expires_at=now + timedelta(hours=1), usable_until=now + timedelta(hours=2),
    )  # fmt: skip


def _snapshot(now: datetime) -> Snapshot:
    proxies = tuple(_proxy(i, now) for i in range(PROXIES))
    return Snapshot(1, 1, now, timedelta(hours=1), proxies=proxies)


def _client(name: str, **limits: frozenset[str]) -> GatewayClient:
    return GatewayClient(name, ("v",), 1_000_000, 1_000_000, **limits)


def _hold_background_load(store: SnapshotStore) -> int:
    """Reserve and activate a random share of every proxy's slots, kept for the whole run."""
    view = store.view()
    assert view is not None
    rng = random.Random(42)  # a reproducible load
    held = 0
    for pid in view.proxies:
        for _ in range(MAXIMUM if rng.random() < 0.1 else rng.randrange(MAXIMUM)):
            ticket = store.reserve(view, pid)
            assert ticket is not None
            store.activate(ticket)
            held += 1
    return held


def _ops_per_second(op: Callable[[], object], seconds: float) -> tuple[list[float], list[float]]:
    """``op`` run for about ``seconds``, ``RUNS`` times: ops/s of each run by this process's
    CPU time (what one core does, whatever else the machine runs) and by wall time."""
    began, calls = time.perf_counter(), 0
    while time.perf_counter() - began < 0.05 or calls < 3:  # calibrate (and warm up)
        op()
        calls += 1
    count = max(3, int(calls / (time.perf_counter() - began) * seconds))
    cpu, wall = [], []
    for _ in range(RUNS):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(count):
            op()
        cpu.append(count / (time.process_time() - cpu0))
        wall.append(count / (time.perf_counter() - wall0))
    return cpu, wall


def bench_select(seconds: float = 1.0) -> None:
    print(f"\n### Selection on the request path: {PROXIES:,} proxies, one core\n")
    loop = min(timeit.repeat("sum(range(1000))", number=20_000, repeat=5)) / 20_000
    print(f"machine speed: sum(range(1000)) {loop * 1e6:.1f} µs (best of 5)")

    def clock() -> datetime:
        return datetime.now(UTC)

    store = SnapshotStore(clock)
    assert store.install(_snapshot(clock())).taken
    held = _hold_background_load(store)
    print(f"background load: {held:,} of {PROXIES * MAXIMUM:,} slots held\n")
    view = store.view()
    assert view is not None
    selector = Selector(store, clock, rng=random.Random(7))
    anyone = _client("anyone")
    restricted = _client(
        "restricted",
        allowed_upstreams=frozenset({"u0", "u1", "u2", "u3"}),
        allowed_regions=frozenset({"US", "DE", "GB", "FR", "NL"}),
        allowed_protocols=frozenset({"http"}),
    )
    cases = {
        "plain": (anyone, ClientRequest("anyone")),
        "region": (anyone, ClientRequest("anyone", region="de")),
        "sticky hit": (anyone, ClientRequest("anyone", session="s1")),
        "restricted": (restricted, ClientRequest("restricted")),
    }
    print("| case | ops/s by CPU time: median / slowest run | µs of CPU per op | ops/s by wall |")
    print("|---|---|---|---|")
    for name, (client, request) in cases.items():

        def op(client: GatewayClient = client, request: ClientRequest = request) -> None:
            chosen = selector.choose(view, client, request)
            assert isinstance(chosen, Chosen), chosen
            store.activate(chosen.ticket)
            store.release(chosen.ticket, active=True)

        cpu, wall = _ops_per_second(op, seconds)
        median = statistics.median(cpu)
        print(f"| {name} | {median:,.0f} / {min(cpu):,.0f} | {1e6 / median:.2f} "
              f"| {statistics.median(wall):,.0f} |")  # fmt: skip
    views = _ops_per_second(store.view, seconds)[0]
    print(f"\n`store.view()` alone: {statistics.median(views):,.0f} calls/s median (CPU time)")
