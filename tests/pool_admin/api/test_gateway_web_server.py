"""The gateway through the real web server (as ``make run`` runs it): a simulated worker's
round over the wire, and extract and assignment racing for the same proxies.

Racing: API clients extract through the server while the real ownership manager ticks for a
worker whose session was opened over the same server. The pool decides each race in one
atomic step, so no proxy is ever both extracted and assigned, and every proxy goes one way at
most.

Two phases, one server. Free running: extractors and the manager at full speed, then the
invariants. Interleaved: while the manager holds the candidates it read, clients extract
through the server (the two draw from the two ends of one index, so free running they meet
only by chance at the end); the manager's assigns of proxies extracted since must be refused.

And the worker's control client with its traffic counter, through the same server: a report
whose answer was lost is sent again unchanged, and its traffic counted once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from activity.ownership_manager import ManagerPolicy, OwnershipManager
from gateway_runtime.control_client import ControlClient, ControlError
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.traffic import TrafficCounter
from pool_admin import bootstrap
from pool_admin.config.models import GatewayTraffic
from pool_admin.gateway_tasks import configured_groups, gateway_shares
from tests.harness.metrics import drain_metrics
from tests.harness.web_server import project_web_server
from tests.pool_admin.api.simulated_worker import OverHttp, SimulatedWorker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]

PROXIES = 240
#: Few assigns per tick, so the manager's ticks interleave with the extracts.
ASSIGNS_PER_TICK = 6
#: The interleaved phase: proxies per round, and extracts (of one proxy) between the manager's
#: candidate read and its assigns: more than the manager's own end leaves them, so they reach
#: into its candidates.
ROUND_PROXIES = 10
EXTRACTS_BETWEEN = 7


@pytest.fixture
def web_server(redis_url, unique_prefix, tmp_path):
    with project_web_server(redis_url, unique_prefix, tmp_path, workers=2) as port:
        yield port


class ExtractsBetween:
    """The real pool, except that each candidate read of the manager is followed, before the
    manager sees it, by ``extract()``: the extracts land between its read and its assigns."""

    def __init__(self, pool: object, extract: Callable[[], None]) -> None:
        self._pool, self._extract = pool, extract

    def assignable(self, *args: object, **kwargs: object) -> object:
        found = self._pool.assignable(*args, **kwargs)  # type: ignore[attr-defined]
        self._extract()
        return found

    def __getattr__(self, name: str) -> object:
        return getattr(self._pool, name)


def _until_stopped(errors: list[BaseException], work: Callable[[], bool]) -> threading.Thread:
    """A thread running ``work`` until it answers False; what it raises is kept."""

    def run() -> None:
        try:
            while work():
                pass
        except BaseException as exc:  # the test fails on it below
            errors.append(exc)

    return threading.Thread(target=run)


@pytest.fixture
def clients(web_server, make_client) -> Iterator[list[httpx.Client]]:
    limits = {"requests_per_second": 10_000, "proxies_per_minute": 100_000}
    keys = [make_client(f"crawler-{i}", **limits).plaintext for i in range(2)]
    made = [
        httpx.Client(
            base_url=f"http://127.0.0.1:{web_server}",
            headers={"Authorization": f"Bearer {key}"},
        )
        for key in keys
    ]
    yield made
    for client in made:
        client.close()


def extract(client: httpx.Client, count: int) -> list[str]:
    answer = client.post("/api/v1/extract", json={"count": count, "mode": "partial"})
    assert answer.status_code == 200, answer.text
    return [p["id"] for p in answer.json()["proxies"]]


def test_no_proxy_is_both_extracted_and_assigned(
    web_server, clients, make_worker, seed, upstreams, pool_clock
):
    upstreams.us.gateway_share_percent = 100
    upstreams.us.save()
    worker = make_worker()
    worker.group.target_capacity = 100 * PROXIES  # it would take every proxy
    worker.group.save()
    opened = clients[0].post(
        "/api/v1/gateway/sessions",
        json={},
        headers={"Authorization": f"Bearer {worker.plaintext}"},
    )
    assert opened.status_code == 200, opened.text
    groups, shares = configured_groups(), gateway_shares()
    pool = bootstrap.get_pool()
    policy = ManagerPolicy(max_assigns=ASSIGNS_PER_TICK)

    def holdings() -> set[str]:
        return {a.proxy_id for a in pool.worker_assignments("edge-1", 2 * PROXIES).assignments}

    # Free running.
    seeded = set(seed(n=PROXIES))
    manager = OwnershipManager(pool, pool_clock, policy)
    extracted: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def extractor(client: httpx.Client) -> Callable[[], bool]:
        def extract_some() -> bool:
            got = extract(client, 3)
            with lock:
                extracted.extend(got)
            return bool(got)

        return extract_some

    def tick() -> bool:
        tally = manager.tick(groups, shares).groups[worker.group.name]
        return tally.assigned > 0 or tally.refused > 0

    threads = [_until_stopped(errors, extractor(c)) for c in clients]
    threads.append(_until_stopped(errors, tick))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    held, taken = holdings(), set(extracted)
    assert len(taken) == len(extracted)  # no proxy extracted twice
    assert not taken & held, sorted(taken & held)[:5]
    assert taken | held == seeded  # every proxy went one way, none was lost
    assert taken and held

    # Interleaved: extracts between each candidate read and its assigns.
    refused = 0
    between: list[str] = []

    def extract_between() -> None:
        for i in range(EXTRACTS_BETWEEN):
            between.extend(extract(clients[i % 2], 1))

    late = ExtractsBetween(pool, extract_between)
    slow = OwnershipManager(late, pool_clock, policy)  # type: ignore[arg-type]
    for _ in range(5):
        fresh = set(seed(n=ROUND_PROXIES))
        between.clear()
        refused += slow.tick(groups, shares).groups[worker.group.name].refused
        now_held = holdings() & fresh
        assert not set(between) & now_held
        assert len(set(between)) == EXTRACTS_BETWEEN
        assert now_held, "the manager assigned none of the round's proxies"
    # Every round's candidates included proxies extracted after the read: the pool refused
    # each such assign (an assign that skipped the check would hold an extracted proxy above).
    assert refused >= 5


def test_a_simulated_worker_over_real_http(web_server, make_worker, seed, upstreams, pool_clock):
    """The simulated worker's whole round over the wire, as a worker will make it: session,
    snapshot (verified), ACK, 304, report, and the fence of a replaced session."""
    upstreams.us.gateway_share_percent = 100
    upstreams.us.save()
    w = make_worker()
    seed(n=3)
    worker = SimulatedWorker(w.plaintext, OverHttp(web_server))
    other = SimulatedWorker(w.plaintext, OverHttp(web_server))
    try:
        assert worker.open().status_code == 200
        groups, shares = configured_groups(), gateway_shares()
        manager = OwnershipManager(bootstrap.get_pool(), pool_clock, ManagerPolicy())
        assert manager.tick(groups, shares).groups[w.group.name].assigned == 3
        assert len(worker.sync().proxies) == 3
        assert worker.fetch().status_code == 304
        worker.active = {worker.snapshot.proxies[0].proxy_id: 1}
        assert worker.report().status_code == 200
        assert other.open().status_code == 200  # replaces the session
        fenced = worker.report()
        assert fenced.status_code == 409
        assert json.loads(fenced.content)["code"] == "session_fenced"
        assert len(other.sync().proxies) == 3
    finally:
        for one in (worker, other):
            one.client.close()


def test_the_workers_control_client_against_the_real_control_plane(
    web_server, make_worker, seed, upstreams, pool_clock
):
    """gateway_runtime's control client: session, verified snapshot installed and ACKed, a
    304 that confirms it, a report of its counters; fenced by another session, its loop opens
    its session again (a new generation) and carries on from report 1."""
    upstreams.us.gateway_share_percent = 100
    upstreams.us.save()
    w = make_worker()
    seed(n=3)
    groups, shares = configured_groups(), gateway_shares()
    manager = OwnershipManager(bootstrap.get_pool(), pool_clock, ManagerPolicy())
    base = f"http://127.0.0.1:{web_server}"

    async def scenario() -> None:
        store = SnapshotStore(lambda: datetime.now(UTC))
        client = ControlClient(base, w.plaintext, store)
        try:
            await client.open_session()
            first = client.generation
            assert manager.tick(groups, shares).groups[w.group.name].assigned == 3
            assert await client.refresh_snapshot() is True
            view = store.view()
            assert view is not None and len(view.proxies) == 3
            assert await client.refresh_snapshot() is False  # a 304: confirmed
            busy = sorted(view.proxies)[0]
            store.activate(store.reserve(view, busy))
            assert await client.send_report() is True
            runtime = bootstrap.get_pool().read_runtime("edge-1")
            assert {e.proxy_id: e.active for e in runtime.entries} == {busy: 1}

            other = SimulatedWorker(w.plaintext, OverHttp(web_server))
            assert other.open().status_code == 200  # fences the client's session
            other.client.close()
            with pytest.raises(ControlError) as fenced:
                await client.send_report()
            assert fenced.value.code == "session_fenced"

            stop = asyncio.Event()
            loop = asyncio.create_task(client.run(stop))
            for _ in range(200):  # the loop re-opens, fetches, ACKs and reports
                runtime = bootstrap.get_pool().read_runtime("edge-1")
                if (
                    client.session_id != first
                    and runtime
                    and runtime.session_id == client.session_id
                ):
                    break
                await asyncio.sleep(0.05)
            stop.set()
            await loop
            assert client.session_id != first
            assert runtime is not None and runtime.session_id == client.session_id
        finally:
            await client.close()

    asyncio.run(scenario())


class LosesTheFirstReportsAnswer(httpx.AsyncBaseTransport):
    """Real HTTP, except that the first report's answer is lost after the control plane took
    the report: the worker cannot tell whether it was accepted."""

    def __init__(self) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self.lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._real.handle_async_request(request)
        if request.url.path.endswith("/reports") and not self.lost:
            self.lost += 1
            await response.aclose()
            raise httpx.ReadError("the answer was lost", request=request)
        return response

    async def aclose(self) -> None:
        await self._real.aclose()


def test_the_workers_traffic_reaches_the_usage_tables_once_though_an_answer_was_lost(
    web_server, make_worker, make_client, seed, upstreams, pool_clock, redis_url, settings
):
    """The control client's reports carry its TrafficCounter's figures; the first report's
    answer is lost after the control plane took it, the same body is sent again (a replay)
    and the traffic is counted once per group, client and upstream."""
    settings.METRICS_REDIS_URL = redis_url
    upstreams.us.gateway_share_percent = 100
    upstreams.us.save()
    w = make_worker()
    make_client("shop", gateway_enabled=True)
    seed(n=2)
    groups, shares = configured_groups(), gateway_shares()
    manager = OwnershipManager(bootstrap.get_pool(), pool_clock, ManagerPolicy())
    transport = LosesTheFirstReportsAnswer()

    async def scenario() -> None:
        store = SnapshotStore(lambda: datetime.now(UTC))
        counter = TrafficCounter()
        base = f"http://127.0.0.1:{web_server}"
        client = ControlClient(base, w.plaintext, store, transport=transport, traffic=counter)
        try:
            await client.open_session()
            assert manager.tick(groups, shares).groups[w.group.name].assigned == 2
            assert await client.refresh_snapshot() is True
            tunnel = counter.record("shop", "acme-us")  # a long tunnel's record
            tunnel.tunnels += 1
            tunnel.bytes_up += 1_000
            counter.record("shop", "acme-us").failed_timeout += 1
            with pytest.raises(ControlError) as lost:
                await client.send_report()
            assert lost.value.code == "unreachable"
            tunnel.bytes_down += 50_000  # meanwhile: the next report's
            assert await client.send_report() is True  # the same body again: a replay
            assert await client.send_report() is True  # sequence 2: the bytes down
        finally:
            await client.close()

    asyncio.run(scenario())
    assert transport.lost == 1

    def counted() -> dict[tuple[str, str, str], list[int]]:
        rows = GatewayTraffic.objects.values_list(
            "worker_group", "client", "upstream", "tunnels", "bytes_up", "bytes_down",
            "failed_timeout", "errors",
        )  # fmt: skip
        totals: dict[tuple[str, str, str], list[int]] = {}
        for group, client, upstream, *figures in rows:
            sums = totals.setdefault((group, client, upstream), [0] * len(figures))
            for i, value in enumerate(figures):
                sums[i] += value
        return totals

    expected = {(w.group.name, "shop", "acme-us"): [1, 1_000, 50_000, 1, 1]}
    for _ in range(100):  # the web server's processes send their events every 0.1 s
        drain_metrics()
        if counted() == expected:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # and nothing more comes (the replay is not counted again)
    drain_metrics()
    assert counted() == expected
