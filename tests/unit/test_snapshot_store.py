"""A gateway worker's local state (gateway_runtime/snapshot_store.py): snapshots swapped whole,
busy proxies left out kept draining until idle, the bounded draining registry, failing closed
past the staleness and recovering, the capacity counters, and the sparse report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway_runtime.snapshot_store import SnapshotStore, Ticket
from gateway_runtime.wire import ReportEntry, Snapshot, SnapshotAck, SnapshotProxy

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def proxy(pid: str, epoch: int = 1, maximum: int = 2, lease_s: int = 120) -> SnapshotProxy:
    return SnapshotProxy(
        proxy_id=pid, host="10.0.0.1", port=8080, protocol="http", region="us", carrier=None,
        upstream="u1", labels={}, max_concurrency=maximum, assignment_epoch=epoch,
        lease_expires_at=T0 + lease_s * SEC, usable_until=T0 + 600 * SEC,
    )  # fmt: skip


def snapshot(version: int, *proxies: SnapshotProxy, staleness_s: int = 30) -> Snapshot:
    return Snapshot(version, 10 + version, T0, staleness_s * SEC, proxies=proxies)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock) -> SnapshotStore:
    return SnapshotStore(clock)


def test_nothing_is_served_before_a_snapshot_and_reports_wait_for_an_ack(store):
    assert store.view() is None
    assert store.install(snapshot(1, proxy("a"))).taken
    assert store.view() is not None
    assert store.report(1) is None
    store.acknowledged(SnapshotAck(1, 11, "0" * 64))
    assert store.report(1).entries == ()


def test_counters_reserve_activate_release_and_respect_capacity(store):
    store.install(snapshot(1, proxy("a", maximum=2)))
    view = store.view()
    one, two = store.reserve(view, "a"), store.reserve(view, "a")
    assert one and two and store.reserve(view, "a") is None  # full
    store.activate(one)
    store.acknowledged(SnapshotAck(1, 11, "0" * 64))
    assert store.report(7).entries == (ReportEntry("a", 1, 1, 1),)
    store.release(two, active=False)
    store.release(one, active=True)
    assert store.report(8).entries == ()  # sparse: idle proxies are left out
    assert store.reserve(view, "a") is not None
    assert store.reserve(view, "missing") is None


def test_a_busy_proxy_left_out_drains_until_idle_and_takes_no_new_work(store):
    store.install(snapshot(1, proxy("a"), proxy("b")))
    ticket = store.reserve(store.view(), "a")
    store.activate(ticket)
    old_view = store.view()
    installed = store.install(snapshot(2, proxy("b")))
    assert installed.taken and installed.draining == 1 and store.draining == {"a"}
    assert store.reserve(store.view(), "a") is None
    assert store.reserve(old_view, "a") is None  # not even through an old view
    store.acknowledged(SnapshotAck(2, 12, "0" * 64))
    assert store.report(1).entries == (ReportEntry("a", 1, 1, 0),)  # under its epoch
    store.release(ticket, active=True)
    assert store.draining == frozenset() and store.report(2).entries == ()


def test_an_idle_proxy_left_out_is_simply_gone(store):
    store.install(snapshot(1, proxy("a"), proxy("b")))
    assert store.install(snapshot(2, proxy("b"))).draining == 0
    assert store.draining == frozenset()


def test_an_older_snapshot_is_refused_and_the_view_kept(store):
    store.install(snapshot(2, proxy("a")))
    refused = store.install(snapshot(2, proxy("b")))
    assert not refused.taken and "not newer" in refused.refused
    assert set(store.view().proxies) == {"a"} and store.refusals == 1


def test_at_the_draining_bound_the_new_snapshot_is_refused_and_the_old_view_kept(clock):
    store = SnapshotStore(clock, max_draining=1)
    store.install(snapshot(1, proxy("a"), proxy("b"), proxy("c")))
    view = store.view()
    for pid in ("a", "b"):
        store.activate(store.reserve(view, pid))
    refused = store.install(snapshot(2, proxy("c")))  # would leave a and b draining
    assert not refused.taken and "draining" in refused.refused
    assert set(store.view().proxies) == {"a", "b", "c"}
    assert store.install(snapshot(3, proxy("b"), proxy("c"))).taken  # only a drains


def test_past_the_staleness_it_fails_closed_and_recovers_when_confirmed(store, clock):
    store.install(snapshot(1, proxy("a"), staleness_s=30))
    clock.now += 30 * SEC
    assert store.view() is not None
    clock.now += SEC
    assert store.view() is None  # fail closed: no new traffic
    store.confirm()  # a 304 from the control plane
    assert store.view() is not None


def test_a_proxy_past_its_lease_takes_no_new_connection(store, clock):
    store.install(snapshot(1, proxy("a", lease_s=60), staleness_s=3600))
    clock.now = T0 + 60 * SEC
    assert store.reserve(store.view(), "a") is None


def test_the_same_assignment_keeps_its_counts_across_snapshots(store):
    store.install(snapshot(1, proxy("a", maximum=1)))
    ticket = store.reserve(store.view(), "a")
    store.activate(ticket)
    store.install(snapshot(2, proxy("a", maximum=3)))
    view = store.view()
    assert store.reserve(view, "a") and store.reserve(view, "a")  # 1 active + 2 of 3
    assert store.reserve(view, "a") is None


def test_holds_are_the_served_views_and_take_stops_at_full_or_the_deadline(store, clock):
    store.install(snapshot(1, proxy("a", maximum=2, lease_s=60), proxy("b"), staleness_s=3600))
    old = store.view()
    store.install(snapshot(2, proxy("a", maximum=2, lease_s=60), staleness_s=3600))
    assert store.holds(old) is None  # nothing new starts on a view no longer served
    holds = store.holds(store.view())
    assert set(holds) == {"a"}
    hold = holds["a"]
    assert hold.deadline == T0 + 60 * SEC  # the lease ends before the use
    first = store.take(hold, T0)
    assert first == Ticket("a", 1) and store.load("a") == 1
    assert store.take(hold, T0 + 60 * SEC) is None  # past the lease, though it has room
    assert store.take(hold, T0) is not None and store.take(hold, T0) is None  # full
    store.activate(first)
    store.release(first, active=True)
    assert store.reserve(store.view(), "a", now=T0 + 59 * SEC) == first
    assert store.reserve(store.view(), "a", now=T0 + 60 * SEC) is None


def test_a_parked_connection_is_reported_but_keeps_no_request_from_its_proxy(store):
    store.install(snapshot(1, proxy("a", maximum=1)))
    store.acknowledged(SnapshotAck(1, 11, "0" * 64))
    view = store.view()
    first = store.reserve(view, "a")
    store.activate(first)
    assert store.park(first)  # its request done, the connection kept idle
    assert store.report(1).entries == (ReportEntry("a", 1, 1, 0),)  # the vendor counts it
    second = store.reserve(view, "a")
    assert second is not None  # the parked one does not make the proxy full
    assert store.crowded(second)  # but with it the proxy is past its maximum...
    store.unpark(second, reused=True)  # ... so the request takes it over
    assert not store.crowded(second)
    assert store.report(2).entries == (ReportEntry("a", 1, 1, 0),)
    assert store.reserve(view, "a") is None
    store.release(second, active=True)
    assert store.report(3).entries == ()


def test_a_parked_connection_keeps_a_draining_proxy_until_closed(store):
    store.install(snapshot(1, proxy("a"), proxy("b")))
    ticket = store.reserve(store.view(), "a")
    store.activate(ticket)
    store.park(ticket)
    assert store.install(snapshot(2, proxy("b"))).draining == 1
    store.unpark(ticket, reused=False)  # the kept connection closed
    assert store.draining == frozenset()
    assert not store.park(ticket)  # nothing of that hold is left to park
