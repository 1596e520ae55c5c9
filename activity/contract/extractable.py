"""Contract: ``extractable(upstream)``, the count of what an extract could draw now, taken
without reading the proxies (port ``SlotsReader``; the ownership manager's room)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import InvalidRequest, ScanBudgetExhausted
from activity.types import PoolOptions, ProxyState

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


def _agrees(h: PoolHarness, upstream: str = "u1") -> int:
    """The count, checked against ``upstream_inventory``'s where that one answers."""
    count = h.pool.extractable(upstream)
    assert count == h.pool.upstream_inventory(upstream).extractable
    return count


class TestExtractable:
    def test_counts_unassigned_available_unexpired_proxies_only(self, make_pool: PoolFactory):
        """AVAILABLE, unowned and usable: not FETCHED, SUSPECT, UNHEALTHY, EXTRACTED, held,
        draining, another upstream's, nor one past its ``usable_until``; the same as
        ``upstream_inventory(...).extractable`` at every step."""
        h = make_pool()
        h.stock("a1", "a2", "a3", "owned", "drained")
        h.stock("short", ttl=20 * SEC)
        h.upsert([h.proxy(p) for p in ["fetched", "unhealthy", "suspect"]])
        h.mark(["unhealthy"], ProxyState.UNHEALTHY)
        h.mark(["suspect"], ProxyState.SUSPECT)
        h.stock("elsewhere", upstream="u2")
        assert _agrees(h) == 6
        h.pool.assign(h.now, "owned", "w1", MIN)
        d = h.pool.assign(h.now, "drained", "w1", MIN)
        h.pool.begin_drain("drained", "w1", d.epoch)
        assert ids(h.take(1, min_remaining=MIN)) == ["a1"]
        assert _agrees(h) == 3  # a2, a3, short
        assert ids(h.take(1, min_remaining=MIN)) == ["a2"]
        assert _agrees(h) == 2  # a3, short
        h.advance(16 * SEC)  # "short" is past its usable_until (5 s margin), not yet expired
        assert _agrees(h) == 1
        h.advance(10 * SEC)  # and past its hard expiry
        assert _agrees(h) == 1
        assert h.pool.inventory("u1") > 1  # inventory counts every unextracted record
        assert _agrees(h, "u2") == 1
        assert _agrees(h, "nobody") == 0

    def test_a_released_or_lapsed_proxy_counts_again(self, make_pool: PoolFactory):
        """A proxy whose lease lapsed is back in the unassigned index once ``expire`` reclaims
        it, and counts again; an UNHEALTHY one back to AVAILABLE counts again."""
        h = make_pool()
        h.stock("held", "sick")
        h.pool.assign(h.now, "held", "w1", MIN)
        h.mark(["sick"], ProxyState.UNHEALTHY)
        assert _agrees(h) == 0
        h.advance(2 * MIN)
        h.pool.expire(h.now, 10)
        h.mark(["sick"], ProxyState.AVAILABLE)
        assert _agrees(h) == 2

    def test_answers_past_the_scan_budget(self, make_pool: PoolFactory):
        """A count, not a scan: an upstream with more live proxies than ``scan_budget`` is
        counted exactly where ``upstream_inventory`` refuses."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("p1", "p2", "p3")
        assert _agrees(h) == 3
        h.stock("p4", "p5", "p6", "p7")
        with pytest.raises(ScanBudgetExhausted):
            h.pool.upstream_inventory("u1")
        assert h.pool.extractable("u1") == 7
        for pid in ("p1", "p2"):
            h.pool.assign(h.now, pid, "w1", MIN)
        assert h.pool.extractable("u1") == 5

    def test_fails_closed_with_more_expired_than_one_read_cleans(self, make_pool: PoolFactory):
        """Its expired records are cleaned first, at most ``scan_budget``; more is
        ``ScanBudgetExhausted``, never a count that may hold a dead proxy. After a sweep the
        count answers."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("d1", "d2", "d3", "d4", "d5", ttl=20 * SEC)
        h.stock("live", upstream="u2", ttl=10 * MIN)
        h.advance(30 * SEC)
        with pytest.raises(ScanBudgetExhausted):
            h.pool.extractable("u1")
        assert h.pool.extractable("u2") == 1  # another upstream's backlog does not matter
        h.pool.sweep(10)
        assert h.pool.extractable("u1") == 0

    def test_bad_upstream_id(self, make_pool: PoolFactory):
        """A malformed upstream ID is a typed error."""
        h = make_pool()
        with pytest.raises(InvalidRequest):
            h.pool.extractable("not an id")
