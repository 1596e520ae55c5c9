"""What the worker's clients see when its snapshot changes or ages: a proxy leaving the
snapshot drains (its tunnels go on, it takes no new one, it is reported until they close);
a sticky session keeps its proxy, and when the proxy is gone ``flex`` moves and ``strict``
answers 502; past the maximum staleness new traffic is answered 503 until the control plane
confirms the snapshot again."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from activity import ManualClock
from gateway_runtime.wire import Credential
from tests.gateway.conftest import get_through, open_tunnel
from tests.gateway.local_worker import LocalWorker, client, proxy, snapshot

LOGIN = (Credential("c1", "gwuser", "gwpass1"),)
CLIENTS = (client("shop"),)


@pytest.fixture
def clock():
    return ManualClock(datetime.now(UTC))


@pytest.fixture
def worker(clock):
    with LocalWorker(clock=clock.now) as running:
        yield running


def loads(worker: LocalWorker, *proxy_ids: str) -> dict[str, int]:
    return worker.call(lambda: {pid: worker.store.load(pid) for pid in proxy_ids})


def test_a_proxy_leaving_the_snapshot_drains(worker, tinyproxy, target):
    both = (proxy("p1", tinyproxy.port), proxy("p2", tinyproxy.port))
    worker.install(snapshot(1, both, LOGIN, CLIENTS))
    tunnel, head = open_tunnel(worker.http_port, target.port, "shop")
    assert head.startswith(b"HTTP/1.1 200")
    busy = next(pid for pid, n in loads(worker, "p1", "p2").items() if n == 1)
    other = "p2" if busy == "p1" else "p1"
    kept = tuple(p for p in both if p.proxy_id == other)
    worker.install(snapshot(2, kept, LOGIN, CLIENTS))
    assert worker.call(lambda: worker.store.draining) == {busy}
    report = worker.call(lambda: worker.store.report(1))
    assert report is None or busy in {e.proxy_id for e in report.entries}

    assert get_through(tunnel).startswith(b"HTTP/1.1 200")  # the old tunnel carries on
    fresh = [open_tunnel(worker.http_port, target.port, "shop")[0] for _ in range(3)]
    assert loads(worker, busy, other) == {busy: 1, other: 3}  # none to the draining proxy
    for sock in fresh:
        sock.close()
    tunnel.close()
    for _ in range(100):
        if not worker.call(lambda: worker.store.draining):
            break
        time.sleep(0.02)
    assert worker.call(lambda: worker.store.draining) == frozenset()
    assert loads(worker, busy) == {busy: 0}


def test_past_the_maximum_staleness_new_traffic_is_503_until_confirmed(
    worker, clock, tinyproxy, target
):
    worker.install(snapshot(1, (proxy("p1", tinyproxy.port),), LOGIN, CLIENTS))
    with httpx.Client(proxy=worker.proxy_url("shop")) as http:
        assert http.get(target.url()).status_code == 200
        clock.advance(timedelta(seconds=31))
        stale = http.get(target.url())
        assert stale.status_code == 503
        assert stale.headers["retry-after"] == "5"
        assert "no current snapshot" in stale.text
        worker.call(worker.store.confirm)  # the control plane answered again (a 304)
        assert http.get(target.url()).status_code == 200


@pytest.mark.parametrize(
    ("mode", "status", "decision"), [("strict", 502, None), ("flex", 200, "moved")]
)
def test_when_a_sessions_proxy_is_gone(worker, tinyproxy, target, mode, status, decision):
    both = (proxy("p1", tinyproxy.port), proxy("p2", tinyproxy.port))
    worker.install(snapshot(1, both, LOGIN, CLIENTS))
    username = f"shop-session-s1-sessionmode-{mode}"
    with httpx.Client(proxy=worker.proxy_url(username)) as http:
        first = http.get(target.url())
        assert first.headers["x-gateway-session"] == "new"
        assert http.get(target.url()).headers["x-gateway-session"] == "hit"
        sticky = worker.call(lambda: worker.selector._sessions[("shop", "s1")].proxy_id)
    # New client connections from here: the kept upstream connection of the old proxy closes.
    rest = tuple(p for p in both if p.proxy_id != sticky)
    worker.install(snapshot(2, rest, LOGIN, CLIENTS))
    with httpx.Client(proxy=worker.proxy_url(username)) as http:
        answer = http.get(target.url())
    assert answer.status_code == status
    if decision is None:
        assert "session's proxy is gone" in answer.text
    else:
        assert answer.headers["x-gateway-session"] == decision


def test_a_kept_connection_never_keeps_a_session_from_its_proxy(worker, tinyproxy, target):
    """Proxies of one connection each: a session's proxy is never 'full' of the worker's own
    idle kept connection, and the proxy never carries two connections at once."""
    one_each = (proxy("p1", tinyproxy.port, max_concurrency=1),
                proxy("p2", tinyproxy.port, max_concurrency=1))  # fmt: skip
    worker.install(snapshot(1, one_each, LOGIN, CLIENTS))
    decisions = []
    for _ in range(4):  # a new client connection each time, as separate curl runs
        with httpx.Client(proxy=worker.proxy_url("shop-session-one")) as http:
            decisions.append(http.get(target.url()).headers["x-gateway-session"])
        counts = worker.call(lambda: [(h.used, h.parked) for h in worker.store._counts.values()])
        assert all(used + parked <= 1 for used, parked in counts)
    assert decisions == ["new", "hit", "hit", "hit"]
    tunnels = [open_tunnel(worker.http_port, target.port, "shop")[0] for _ in range(2)]
    sock, head = open_tunnel(worker.http_port, target.port, "shop")
    assert head.startswith(b"HTTP/1.1 503")  # both proxies carry their one connection
    for one in (*tunnels, sock):
        one.close()
