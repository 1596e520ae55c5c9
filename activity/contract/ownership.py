"""Contract: worker ownership, epochs and drain (ADR-005 "Worker 所有权")."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import InvalidRequest, OwnershipConflict, SnapshotRejected
from activity.types import (
    DrainStatus,
    PoolOptions,
    ProxyState,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


class _Reason:
    """``with _Reason("wrong_epoch"):`` expects an OwnershipConflict with that reason."""

    def __init__(self, reason: str):
        self.reason = reason

    def __enter__(self):
        self._ctx = pytest.raises(OwnershipConflict)
        self._info = self._ctx.__enter__()
        return self._info

    def __exit__(self, *exc):
        suppressed = self._ctx.__exit__(*exc)
        assert self._info.value.reason == self.reason
        return suppressed


def _snapshot_acked(h: PoolHarness, worker: str, session: str, excluded_from: list[str]) -> None:
    """Issue and ACK a complete snapshot of the worker's current assignments."""
    view = h.pool.worker_assignments(worker, 100)
    included = [a.proxy_id for a in view.assignments]
    assert not set(included) & set(excluded_from)
    ref = SnapshotRef(h.serial(), view.epoch, f"sum-{view.epoch}")
    h.pool.issue_snapshot(worker, session, ref, included)
    h.pool.acknowledge_snapshot(worker, session, ref.version)


class TestOwnership:
    def test_assign_takes_an_available_proxy_out_of_the_pool(self, make_pool: PoolFactory):
        """Worker 所有权: assign accepts AVAILABLE, unowned, before usable_until."""
        h = make_pool()
        h.stock("p1", ttl=10 * MIN)
        a = h.pool.assign(h.now, "p1", "w1", 30 * SEC)
        assert (a.proxy_id, a.worker_id, a.draining) == ("p1", "w1", False)
        assert a.lease_expires_at == h.now + 30 * SEC
        assert a.epoch >= 1
        assert h.pool.get("p1") == a
        assert h.pool.inventory("u1") == 1  # owned is still unextracted
        assert h.take(1).proxies == ()

    def test_epochs_strictly_increase(self, make_pool: PoolFactory):
        """Worker 所有权: the global epoch is an INCR; every assignment gets a new one."""
        h = make_pool()
        h.stock("p1", "p2")
        e1 = h.pool.assign(h.now, "p1", "w1", MIN).epoch
        e2 = h.pool.assign(h.now, "p2", "w2", MIN).epoch
        assert e2 > e1

    def test_lease_is_capped_at_usable_until(self, make_pool: PoolFactory):
        """Worker 所有权: a lease never outlives usable_until."""
        h = make_pool()
        h.upsert([h.proxy("p1", ttl=MIN)], margin=10 * SEC)
        h.mark(["p1"])
        a = h.pool.assign(h.now, "p1", "w1", 5 * MIN)
        assert a.lease_expires_at == h.now + 50 * SEC

    def test_assign_refusals(self, make_pool: PoolFactory):
        """Worker 所有权: assign refuses unknown, owned, non-AVAILABLE and too-late proxies."""
        h = make_pool()
        h.stock("owned", "late")
        h.upsert([h.proxy("fetched")])
        h.pool.assign(h.now, "owned", "w1", MIN)
        with _Reason("not_found"):
            h.pool.assign(h.now, "ghost", "w1", MIN)
        with _Reason("already_owned"):
            h.pool.assign(h.now, "owned", "w2", MIN)
        with _Reason("not_available"):
            h.pool.assign(h.now, "fetched", "w1", MIN)
        with _Reason("past_usable"):
            h.pool.assign(h.now + 9 * MIN + 56 * SEC, "late", "w1", MIN)

    def test_assign_and_extract_exclude_each_other(self, make_pool: PoolFactory):
        """Worker 所有权: assign and extract racing for one proxy: exactly one wins."""
        h = make_pool()
        h.stock("p1", "p2")
        h.pool.assign(h.now, "p1", "w1", MIN)
        assert ids(h.take(5)) == ["p2"]
        with _Reason("not_available"):
            h.pool.assign(h.now, "p2", "w1", MIN)

    def test_renew(self, make_pool: PoolFactory):
        """Worker 所有权: renew must match worker and epoch, and is capped at usable_until."""
        h = make_pool()
        h.upsert([h.proxy("p1", ttl=2 * MIN)], margin=10 * SEC)
        h.mark(["p1"])
        a = h.pool.assign(h.now, "p1", "w1", 30 * SEC)
        h.advance(20 * SEC)
        b = h.pool.renew(h.now, "p1", "w1", a.epoch, 30 * SEC)
        assert b.lease_expires_at == h.now + 30 * SEC
        assert b.epoch == a.epoch
        with _Reason("wrong_worker"):
            h.pool.renew(h.now, "p1", "w2", a.epoch, 30 * SEC)
        with _Reason("wrong_epoch"):
            h.pool.renew(h.now, "p1", "w1", a.epoch + 1, 30 * SEC)
        c = h.pool.renew(h.now, "p1", "w1", a.epoch, 10 * MIN)
        assert c.lease_expires_at == h.now - 20 * SEC + 2 * MIN - 10 * SEC
        with _Reason("not_owned"):
            h.stock("free")
            h.pool.renew(h.now, "free", "w1", 1, MIN)

    def test_renew_after_the_lease_ran_out(self, make_pool: PoolFactory):
        """Worker 所有权: a lapsed lease is not silently revived."""
        h = make_pool()
        h.stock("p1")
        a = h.pool.assign(h.now, "p1", "w1", 10 * SEC)
        with _Reason("lease_expired"):
            h.pool.renew(h.now + 10 * SEC, "p1", "w1", a.epoch, MIN)

    def test_begin_drain_is_idempotent_and_bumps_the_epoch_once(self, make_pool: PoolFactory):
        """Worker 所有权: first begin_drain writes a ticket and bumps the epoch; repeats don't."""
        h = make_pool()
        h.stock("p1", "p2", "p3")
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        d1 = h.pool.begin_drain("p1", "w1", a.epoch)
        d2 = h.pool.begin_drain("p1", "w1", a.epoch)
        assert d1 == d2 and d1.draining and d1.epoch == a.epoch
        tickets = h.pool.drain_tickets("w1", 10)
        assert [(t.proxy_id, t.assignment_epoch, t.snapshot) for t in tickets] == [
            ("p1", a.epoch, None)
        ]
        assert tickets[0].required_epoch == a.epoch + 1
        assert h.pool.assign(h.now, "p2", "w1", MIN).epoch == a.epoch + 2
        with _Reason("draining"):
            h.pool.renew(h.now, "p1", "w1", a.epoch, MIN)
        with _Reason("wrong_epoch"):
            h.pool.begin_drain("p1", "w1", a.epoch + 5)

    def test_draining_leaves_the_worker_snapshot_set(self, make_pool: PoolFactory):
        """Worker 所有权: worker-owned holds only non-draining assignments, in lease order."""
        h = make_pool()
        h.stock("p1", "p2", "p3")
        a1 = h.pool.assign(h.now, "p1", "w1", 3 * MIN)
        h.pool.assign(h.now, "p2", "w1", 1 * MIN)
        h.pool.assign(h.now, "p3", "w1", 2 * MIN)
        h.pool.begin_drain("p1", "w1", a1.epoch)
        view = h.pool.worker_assignments("w1", 10)
        assert [a.proxy_id for a in view.assignments] == ["p2", "p3"]
        assert view.complete
        assert h.pool.worker_assignments("w1", 2).complete
        assert not h.pool.worker_assignments("w1", 1).complete
        assert view.epoch == a1.epoch + 3  # two assigns after p1, then the drain

    def test_worker_assignments_describe_each_held_proxy(self, make_pool: PoolFactory):
        """Worker 运行态: what a snapshot is built from and the manager judges, in one read:
        each held proxy whole, its health and its capacity; a drained one is no longer held."""
        h = make_pool()
        h.stock("p1", region="DE", carrier="vodafone", max_concurrency=7, ttl=5 * MIN)
        h.stock("p2", protocol="socks5", max_concurrency=3)
        h.stock("p3")
        a1 = h.pool.assign(h.now, "p1", "w1", MIN)
        h.pool.assign(h.now, "p2", "w1", MIN)
        h.pool.assign(h.now, "p3", "w2", MIN)
        h.mark(["p2"], ProxyState.SUSPECT)
        view = h.pool.worker_assignments("w1", 10)
        assert set(view.held) == {"p1", "p2"}
        p1, p2 = view.held["p1"], view.held["p2"]
        listed = h.proxy("p1", region="DE", carrier="vodafone", max_concurrency=7, ttl=5 * MIN)
        assert (p1.proxy.host, p1.proxy.port, p1.proxy.protocol) == (
            listed.host,
            listed.port,
            "http",
        )
        assert (p1.proxy.upstream_id, p1.proxy.region, p1.proxy.carrier) == ("u1", "DE", "vodafone")
        assert p1.proxy.usable_until <= h.now + 5 * MIN
        assert (p1.state, p1.max_concurrency) == (ProxyState.AVAILABLE, 7)
        assert (p2.state, p2.max_concurrency, p2.proxy.protocol) == (
            ProxyState.SUSPECT,
            3,
            "socks5",
        )
        h.pool.begin_drain("p1", "w1", a1.epoch)
        assert set(h.pool.worker_assignments("w1", 10).held) == {"p2"}
        assert set(h.pool.worker_assignments("w1", 1).held) <= {"p2"}

    def test_acknowledge_drain_waits_for_zero_counts(self, make_pool: PoolFactory):
        """Worker 所有权: AcknowledgeDrain releases only at active = reserved = 0."""
        h = make_pool()
        h.stock("p1")
        h.pool.open_session("w1", "s1", MIN)
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        with _Reason("not_draining"):
            h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0)
        h.pool.begin_drain("p1", "w1", a.epoch)
        _snapshot_acked(h, "w1", "s1", excluded_from=["p1"])
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 1, 0) is DrainStatus.WAITING_COUNTS
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 2) is DrainStatus.WAITING_COUNTS
        assert h.pool.get("p1") is not None
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.RELEASED
        assert h.pool.get("p1") is None
        assert ids(h.take(1)) == ["p1"]  # still AVAILABLE and usable: back in the pool

    def test_acknowledge_drain_waits_for_an_acked_excluding_snapshot(self, make_pool):
        """Worker 运行态: zero counts wait for an ACKed snapshot that excludes the proxy."""
        h = make_pool()
        h.stock("p1")
        h.pool.open_session("w1", "s1", MIN)
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        view = h.pool.worker_assignments("w1", 10)
        old = SnapshotRef(1, view.epoch, "with-p1")
        h.pool.issue_snapshot("w1", "s1", old, ["p1"])
        h.pool.begin_drain("p1", "w1", a.epoch)
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.WAITING_SNAPSHOT
        h.pool.acknowledge_snapshot("w1", "s1", 1)  # the old snapshot still has p1
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.WAITING_SNAPSHOT
        view = h.pool.worker_assignments("w1", 10)
        new = SnapshotRef(2, view.epoch, "without-p1")
        assert h.pool.issue_snapshot("w1", "s1", new, []) == 1
        assert h.pool.drain_tickets("w1", 10)[0].snapshot == new
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.WAITING_SNAPSHOT
        h.pool.acknowledge_snapshot("w1", "s1", 2)
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.RELEASED

    def test_a_busy_stored_report_outweighs_a_callers_zero(self, make_pool: PoolFactory):
        """Worker 运行态: ACK, barrier and counts are checked together against stored state."""
        h = make_pool()
        h.stock("p1")
        h.pool.open_session("w1", "s1", MIN)
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        view = h.pool.worker_assignments("w1", 10)
        first = SnapshotRef(h.serial(), view.epoch, "with")
        h.pool.issue_snapshot("w1", "s1", first, ["p1"])
        h.pool.acknowledge_snapshot("w1", "s1", first.version)
        entries = (RuntimeEntry("p1", a.epoch, 3, 0),)
        busy = RuntimeReport("w1", "s1", 1, first.version, view.epoch, entries)
        h.pool.write_report(busy)
        h.pool.begin_drain("p1", "w1", a.epoch)
        _snapshot_acked(h, "w1", "s1", excluded_from=["p1"])
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.WAITING_COUNTS
        assert h.take(1).proxies == ()

    def test_later_snapshots_may_not_bring_a_draining_proxy_back(self, make_pool: PoolFactory):
        """Worker 运行态: snapshot epochs never go back, and a new one cannot hold the proxy."""
        h = make_pool()
        h.stock("p1")
        h.pool.open_session("w1", "s1", MIN)
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        before = h.pool.worker_assignments("w1", 10).epoch
        h.pool.begin_drain("p1", "w1", a.epoch)
        after = h.pool.worker_assignments("w1", 10).epoch
        h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, after, "excl"), [])
        with pytest.raises(SnapshotRejected) as err:
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(2, before, "stale"), ["p1"])
        assert err.value.reason == "version_order"
        with pytest.raises(SnapshotRejected) as err:
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(2, after, "bad"), ["p1"])
        assert err.value.reason == "includes_draining"

    def test_a_binding_does_not_survive_a_new_session_generation(self, make_pool: PoolFactory):
        """Worker 运行态 rule 1: a ticket bound for one session says nothing about the next."""
        h = make_pool()
        h.stock("p1")
        h.pool.open_session("w1", "s1", timedelta(milliseconds=300))
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        h.pool.begin_drain("p1", "w1", a.epoch)
        _snapshot_acked(h, "w1", "s1", excluded_from=["p1"])
        h.advance_server(timedelta(milliseconds=600))
        again = h.pool.open_session("w1", "s1", MIN)  # same ID, expired: a new generation
        assert again.acked is None
        assert h.pool.acknowledge_drain("p1", "w1", a.epoch, 0, 0) is DrainStatus.WAITING_SNAPSHOT

    def test_assign_checks_hard_expiry_at_the_callers_time(self, make_pool: PoolFactory):
        """Worker 所有权: a proxy dead at the assignment's own `now` is not assigned."""
        h = make_pool()
        h.stock("p1", ttl=MIN)
        with _Reason("not_found"):
            h.pool.assign(h.now + 2 * MIN, "p1", "w1", MIN)
        assert h.pool.inventory("u1") == 1  # the pool's own clock still sees it alive

    def test_a_snapshot_older_than_the_drain_does_not_bind(self, make_pool: PoolFactory):
        """Worker 运行态: the ticket binds only to a snapshot not older than its required epoch."""
        h = make_pool()
        h.stock("p1", "p2")
        h.pool.open_session("w1", "s1", MIN)
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        before = h.pool.worker_assignments("w1", 10).epoch
        h.pool.begin_drain("p1", "w1", a.epoch)
        assert h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, before, "stale"), []) == 0
        assert h.pool.drain_tickets("w1", 10)[0].snapshot is None

    def test_expire_is_bounded_and_complete(self, make_pool: PoolFactory):
        """Worker 所有权: expire returns at most limit; repeated calls reclaim everything."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(7)])
        for i in range(7):
            h.pool.assign(h.now, f"p{i}", "w1", (10 + i) * SEC)
        later = h.now + 15 * SEC  # p0..p5 are due, p6 is not
        seen = []
        for _ in range(5):
            batch = h.pool.expire(later, 4)
            assert len(batch) <= 4
            seen += [a.proxy_id for a in batch]
        assert seen == [f"p{i}" for i in range(6)]
        assert h.pool.get("p6") is not None
        assert h.pool.get("p0") is None
        h.advance(15 * SEC)
        assert len(h.take(10).proxies) == 6  # reclaimed proxies are AVAILABLE again

    def test_expired_lease_of_a_drained_assignment_drops_the_ticket(self, make_pool):
        """Worker 所有权: expire also reclaims draining assignments and their tickets."""
        h = make_pool()
        h.stock("p1")
        a = h.pool.assign(h.now, "p1", "w1", 10 * SEC)
        h.pool.begin_drain("p1", "w1", a.epoch)
        assert [x.proxy_id for x in h.pool.expire(h.now + 10 * SEC, 10)] == ["p1"]
        assert h.pool.drain_tickets("w1", 10) == []

    def test_hard_expiry_ends_ownership(self, make_pool: PoolFactory):
        """短 TTL 清理: a proxy past its hard expiry takes its assignment with it."""
        h = make_pool()
        h.stock("p1", ttl=MIN)
        h.pool.assign(h.now, "p1", "w1", MIN)
        h.advance(2 * MIN)
        assert h.pool.sweep(10).expired == 1
        assert h.pool.get("p1") is None
        assert h.pool.worker_assignments("w1", 10).assignments == ()

    def test_health_change_of_an_owned_proxy_keeps_the_owner(self, make_pool: PoolFactory):
        """Worker 所有权: the checker's verdict does not move ownership; the manager drains."""
        h = make_pool()
        h.stock("p1")
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        h.advance(SEC)
        h.mark(["p1"], ProxyState.UNHEALTHY)
        assert h.pool.get("p1") == a


def _naive() -> datetime:
    return datetime(2026, 1, 1)  # noqa: DTZ001 - deliberately naive


class TestOwnershipInput:
    @pytest.mark.parametrize(
        "call",
        [
            lambda h, a: h.pool.assign(_naive(), "p2", "w1", MIN),
            lambda h, a: h.pool.assign(h.now, "p2", "w1", timedelta(0)),
            lambda h, a: h.pool.assign(h.now, "p2", "", MIN),
            lambda h, a: h.pool.assign(h.now, "p2", "w1", timedelta(days=400)),
            lambda h, a: h.pool.renew(h.now, "p1", "w1", -1, MIN),
            lambda h, a: h.pool.renew(h.now, "p1", ["w1"], a.epoch, MIN),
            lambda h, a: h.pool.begin_drain("p1", "w1", "1"),
            lambda h, a: h.pool.acknowledge_drain("p1", "w1", a.epoch, -1, 0),
            lambda h, a: h.pool.expire(h.now + 2 * MIN, 0),
            lambda h, a: h.pool.expire(h.now + 2 * MIN, 10_001),
            lambda h, a: h.pool.expire(_naive(), 10),
        ],
        ids=[
            "naive now",
            "zero ttl",
            "empty worker",
            "ttl of over a year",
            "negative epoch",
            "worker as a list",
            "epoch as a string",
            "negative active",
            "zero limit",
            "limit above the cap",
            "naive expire",
        ],
    )
    def test_bad_ownership_input(self, make_pool: PoolFactory, call):
        """Worker 所有权: bad input is a typed error and assigns nothing."""
        h = make_pool(options=PoolOptions(max_sweep_limit=10_000))
        h.stock("p1", "p2")
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        with pytest.raises(InvalidRequest):
            call(h, a)
        assert h.pool.get("p1") == a
        assert ids(h.take(2)) == ["p2"]
