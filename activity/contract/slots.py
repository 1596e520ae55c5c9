"""Contract: managed count and available slots (ADR-005 ``pool.InventoryReader``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import InvalidRequest, ScanBudgetExhausted
from activity.types import PoolOptions, ProxyState, RuntimeEntry, RuntimeReport, SnapshotRef

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


class TestSlots:
    def test_managed_counts_the_adrs_states(self, make_pool: PoolFactory):
        """Slots: managed = FETCHED/CHECKING/AVAILABLE/SUSPECT/DRAINING of the upstream."""
        h = make_pool()
        h.upsert(
            [
                h.proxy(p)
                for p in [
                    "fetched",
                    "checking",
                    "avail",
                    "suspect",
                    "unhealthy",
                    "removed",
                    "extracted",
                    "draining",
                ]
            ]
        )
        h.upsert([h.proxy("elsewhere")], upstream="u2")
        h.mark(["checking"], ProxyState.CHECKING)
        h.mark(["avail", "extracted", "draining"], ProxyState.AVAILABLE)
        h.mark(["suspect"], ProxyState.SUSPECT)
        h.mark(["unhealthy"], ProxyState.UNHEALTHY)
        h.mark(["removed"], ProxyState.REMOVED)
        assert ids(h.take(1)) == ["avail"]
        a = h.pool.assign(h.now, "draining", "w1", MIN)
        h.pool.begin_drain("draining", "w1", a.epoch)
        assert ids(h.take(1)) == ["extracted"]
        # fetched, checking, suspect, draining
        assert h.pool.upstream_inventory("u1").managed == 4
        assert h.pool.upstream_inventory("u2").managed == 1

    def test_extractable_counts_what_an_extract_could_draw_now(self, make_pool: PoolFactory):
        """Inventory: AVAILABLE, unowned, unexpired proxies of the upstream, and no other state
        (the pool's ``inventory`` counts every unextracted record, UNHEALTHY ones too)."""
        h = make_pool()
        h.stock("a1", "a2", "a3", "owned", "taken")
        h.stock("short", ttl=20 * SEC)
        h.upsert([h.proxy(p) for p in ["fetched", "unhealthy", "suspect"]])
        h.mark(["unhealthy"], ProxyState.UNHEALTHY)
        h.mark(["suspect"], ProxyState.SUSPECT)
        h.stock("elsewhere", upstream="u2")
        h.pool.assign(h.now, "owned", "w1", MIN)
        assert ids(h.take(1, min_remaining=MIN)) == ["a1"]
        assert h.pool.upstream_inventory("u1").extractable == 4  # a2, a3, taken, short
        h.advance(30 * SEC)
        inv = h.pool.upstream_inventory("u1")
        assert inv.extractable == 3  # short has expired
        assert h.pool.inventory("u1") > inv.extractable
        assert h.pool.upstream_inventory("u2").extractable == 1

    def test_unassigned_available_proxies_offer_their_maximum(self, make_pool: PoolFactory):
        """Slots: an unassigned AVAILABLE proxy contributes max."""
        h = make_pool()
        h.stock("p1", max_concurrency=3)
        h.stock("p2", max_concurrency=5)
        h.upsert([h.proxy("p3", max_concurrency=7)])  # FETCHED: no slots
        h.stock("other", upstream="u2", max_concurrency=11)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.managed, inv.available_slots) == (3, 8)

    def test_assigned_with_unknown_runtime_offers_nothing(self, make_pool: PoolFactory):
        """Slots: assigned but no fresh runtime -> zero (fail closed)."""
        h = make_pool()
        h.stock("p1", "p2", max_concurrency=4)
        h.pool.assign(h.now, "p1", "w1", MIN)
        assert h.pool.upstream_inventory("u1").available_slots == 4

    def test_assigned_with_fresh_runtime_offers_what_is_free(self, make_pool: PoolFactory):
        """Slots: max - active - reserved when ownership and the fresh runtime agree."""
        h = make_pool()
        h.stock("p1", "p2", max_concurrency=4)
        h.pool.open_session("w1", "s1", MIN)
        a1 = h.pool.assign(h.now, "p1", "w1", MIN)
        h.pool.assign(h.now, "p2", "w1", MIN)
        view = h.pool.worker_assignments("w1", 10)
        h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, view.epoch, "c"), ["p1", "p2"])
        h.pool.acknowledge_snapshot("w1", "s1", 1)
        h.pool.write_report(
            RuntimeReport("w1", "s1", 1, 1, view.epoch, (RuntimeEntry("p1", a1.epoch, 1, 2),))
        )
        assert h.pool.upstream_inventory("u1").available_slots == 1 + 4

    def test_draining_and_past_usable_offer_nothing(self, make_pool: PoolFactory):
        """Slots: only AVAILABLE proxies outside the safety margin count."""
        h = make_pool()
        h.stock("short", ttl=MIN, max_concurrency=2)
        h.stock("drain", ttl=10 * MIN, max_concurrency=3)
        a = h.pool.assign(h.now, "drain", "w1", MIN)
        h.pool.begin_drain("drain", "w1", a.epoch)
        assert h.pool.upstream_inventory("u1").available_slots == 2
        h.advance(56 * SEC)  # "short" is inside its safety margin now
        inv = h.pool.upstream_inventory("u1")
        assert inv.available_slots == 0
        assert inv.managed == 2

    @pytest.mark.parametrize("departure", ["unhealthy", "draining", "expired"])
    def test_an_assigned_proxy_leaving_available_offers_nothing(self, make_pool, departure):
        """Slots: "只统计 ... 状态为 AVAILABLE": an assigned proxy that stops being AVAILABLE (or
        starts draining, or reaches its hard expiry) leaves the upstream's assigned index,
        even while the worker's fresh report still vouches for it."""
        h = make_pool()
        h.stock("p1", max_concurrency=4, ttl=MIN)
        h.stock("p2", max_concurrency=3, ttl=10 * MIN)
        h.pool.open_session("w1", "s1", 10 * MIN)
        a1 = h.pool.assign(h.now, "p1", "w1", 10 * MIN)
        h.pool.assign(h.now, "p2", "w1", 10 * MIN)
        view = h.pool.worker_assignments("w1", 10)
        h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, view.epoch, "c"), ["p1", "p2"])
        h.pool.acknowledge_snapshot("w1", "s1", 1)
        h.pool.write_report(RuntimeReport("w1", "s1", 1, 1, view.epoch, ()))
        assert h.pool.upstream_inventory("u1").available_slots == 4 + 3
        if departure == "unhealthy":
            h.mark(["p1"], ProxyState.UNHEALTHY)
        elif departure == "draining":
            h.pool.begin_drain("p1", "w1", a1.epoch)
        else:
            h.advance(MIN)
        assert h.pool.upstream_inventory("u1").available_slots == 3

    def test_gateway_held_counts_what_workers_hold_without_draining(self, make_pool: PoolFactory):
        """Inventory: ``gateway_held`` is the upstream's AVAILABLE proxies a worker holds without
        draining, unexpired; ``gateway_capacity`` their ``max_concurrency`` summed, whatever
        their runtime says. A draining one, an unowned one and another upstream's do not count."""
        h = make_pool()
        h.stock("a", max_concurrency=3)
        h.stock("b", max_concurrency=5)
        h.stock("c", max_concurrency=7)
        h.stock("free", max_concurrency=11)
        h.stock("other", upstream="u2", max_concurrency=13)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity) == (0, 0)
        h.pool.assign(h.now, "a", "w1", MIN)
        h.pool.assign(h.now, "b", "w2", MIN)  # two workers: both count
        c = h.pool.assign(h.now, "c", "w1", MIN)
        h.pool.assign(h.now, "other", "w1", MIN)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity) == (3, 3 + 5 + 7)
        assert inv.extractable == 1  # "free": held and extractable never overlap
        h.pool.begin_drain("c", "w1", c.epoch)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity) == (2, 3 + 5)
        u2 = h.pool.upstream_inventory("u2")
        assert (u2.gateway_held, u2.gateway_capacity) == (1, 13)

    def test_gateway_held_ends_with_the_assignment_or_usability(self, make_pool: PoolFactory):
        """Inventory: a held proxy whose lease lapsed still counts until ``expire`` reclaims it
        (the owned index holds it till then), then no more; one past its ``usable_until`` or
        no longer AVAILABLE does not count."""
        h = make_pool()
        h.stock("short", ttl=MIN, max_concurrency=2)
        h.stock("long", ttl=10 * MIN, max_concurrency=3)
        h.stock("sick", ttl=10 * MIN, max_concurrency=4)
        for pid in ("short", "long", "sick"):
            h.pool.assign(h.now, pid, "w1", 2 * MIN)
        assert h.pool.upstream_inventory("u1").gateway_capacity == 2 + 3 + 4
        h.mark(["sick"], ProxyState.UNHEALTHY)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity) == (2, 2 + 3)
        h.advance(56 * SEC)  # "short" is inside its safety margin: past usable_until
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity) == (1, 3)
        h.advance(2 * MIN)  # the lease on "long" lapsed, not yet reclaimed
        assert h.pool.upstream_inventory("u1").gateway_held == 1
        h.pool.expire(h.now, 10)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity) == (0, 0)
        assert inv.extractable == 1  # "long" is back in the unassigned index

    def test_held_proxies_count_against_the_scan_budget(self, make_pool: PoolFactory):
        """Inventory: held proxies are read in the same budget; over it the read fails whole,
        never a partial ``gateway_held``."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("p1", "p2", "p3", max_concurrency=2)
        for pid in ("p1", "p2"):
            h.pool.assign(h.now, pid, "w1", MIN)
        inv = h.pool.upstream_inventory("u1")
        assert (inv.gateway_held, inv.gateway_capacity, inv.extractable) == (2, 4, 1)
        h.stock("p4")
        h.pool.assign(h.now, "p4", "w1", MIN)
        with pytest.raises(ScanBudgetExhausted):
            h.pool.upstream_inventory("u1")

    def test_fails_closed_over_the_scan_budget(self, make_pool: PoolFactory):
        """Slots: more index members than one scan may read -> error, never an approximation."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("p1", "p2", "p3")
        assert h.pool.upstream_inventory("u1").available_slots == 12
        h.stock("x1", "x2", "x3", "x4", upstream="u2")  # other upstreams do not matter
        assert h.pool.upstream_inventory("u1").available_slots == 12
        h.stock("p4")
        with pytest.raises(ScanBudgetExhausted):
            h.pool.upstream_inventory("u1")

    def test_bad_upstream_id(self, make_pool: PoolFactory):
        """Slots / inventory: a malformed upstream ID is a typed error."""
        h = make_pool()
        for call in (h.pool.upstream_inventory, h.pool.inventory):
            with pytest.raises(InvalidRequest):
                call("not an id")
