"""Contract: bounded cleaning and exact inventory (ADR-005 "短 TTL 清理", "库存真值")."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import InvalidRequest, ScanBudgetExhausted
from activity.types import ExpiredTally, ExtractMode, PoolOptions

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


class TestSweep:
    def test_sweep_is_bounded_and_eventually_complete(self, make_pool: PoolFactory):
        """短 TTL 清理 layer 3: sweep(limit) removes at most limit; repeated calls finish."""
        h = make_pool()
        h.stock(*[f"old{i}" for i in range(10)], ttl=MIN)
        h.stock("live", ttl=10 * MIN)
        h.advance(2 * MIN)
        results = [h.pool.sweep(4) for _ in range(4)]
        assert [(r.expired, r.more) for r in results] == [
            (4, True),
            (4, True),
            (2, False),
            (0, False),
        ]
        assert h.pool.inventory("u1") == 1
        assert ids(h.take(5)) == ["live"]

    def test_sweep_keeps_counters_true(self, make_pool: PoolFactory):
        """库存真值: EXPIRED decrements inventory once; extracted ones were already gone."""
        h = make_pool()
        h.stock("a", "b", "c", ttl=MIN)
        h.take(1)
        assert h.pool.inventory("u1") == 2
        h.advance(2 * MIN)
        assert h.pool.sweep(100).expired == 3
        assert h.pool.inventory("u1") == 0
        assert h.pool.upstream_inventory("u1").managed == 0
        h.stock("a")
        assert h.pool.inventory("u1") == 1

    def test_sweep_takes_the_tally_of_expired_records_used_or_not(self, make_pool: PoolFactory):
        """Usage metrics: every record removed at expiry since the last sweep, by upstream, used
        (extracted, or assigned to a worker) or never used; told once."""
        h = make_pool()
        h.stock("a", "b", "c", "d", ttl=MIN)
        h.stock("e", upstream="u2", ttl=MIN)
        h.stock("live", ttl=10 * MIN)
        assert [p.proxy_id for p in h.take(1, upstream="u1").proxies] == ["a"]
        h.pool.assign(h.now, "b", "w1", 10 * MIN)
        h.advance(2 * MIN)
        first = h.pool.sweep(100)
        assert first.expired == 5
        assert first.tally == {"u1": ExpiredTally(used=2, unused=2), "u2": ExpiredTally(0, 1)}
        assert h.pool.sweep(100).tally == {}

    def test_the_tally_counts_what_any_write_cleaned(self, make_pool: PoolFactory):
        """A record a write's own cleaning removed (an upsert, an extract) is tallied too, and
        bounded sweeps that leave more for later add up to every record once."""
        h = make_pool()
        h.stock("a", "b", ttl=MIN)
        h.stock("x", "y", "z", upstream="u2", ttl=MIN)
        h.advance(2 * MIN)
        h.stock("c")  # the upsert cleans expired records first (its own upstream's, at least)
        swept, used, unused = 0, Counter[str](), Counter[str]()
        for _ in range(5):
            result = h.pool.sweep(2)
            swept += result.expired
            for upstream, tally in result.tally.items():
                used[upstream] += tally.used
                unused[upstream] += tally.unused
            if not result.more:
                break
        assert swept < 5  # the upsert removed some: the sweeps still told them
        assert (dict(used), dict(unused)) == ({"u1": 0, "u2": 0}, {"u1": 2, "u2": 3})
        assert h.pool.sweep(10).tally == {}

    def test_the_tally_counts_expired_incumbents_an_upsert_replaced(self, make_pool: PoolFactory):
        """An expired record an upsert removes because a candidate comes under its ID or its
        exit (past what its bounded cleaning reached) is tallied too, used or not."""
        h = make_pool(options=PoolOptions(clean_budget=1))
        h.stock("a", "b", "c", ttl=MIN)
        h.stock("d", ttl=MIN, unique_key="exit-d")
        assert ids(h.take(1, upstream="u1")) == ["a"]
        h.advance(2 * MIN)
        # The upsert's cleaning reaches one record; "b" and "c" come again under their IDs,
        # and "d2" under "d"'s exit.
        h.upsert([h.proxy("b"), h.proxy("c"), h.proxy("d2", unique_key="exit-d")])
        assert h.pool.upstream_inventory("u1").managed == 3
        assert h.pool.sweep(10).tally == {"u1": ExpiredTally(used=1, unused=3)}
        assert h.pool.sweep(10).tally == {}

    def test_inventory_is_exact_before_sweep_runs(self, make_pool: PoolFactory):
        """库存真值: inventory never counts a proxy past its hard expiry, swept or not."""
        h = make_pool()
        h.stock("a", ttl=MIN)
        h.stock("b", ttl=3 * MIN)
        h.advance(2 * MIN)
        assert h.pool.inventory("u1") == 1

    def test_inventory_fails_closed_when_too_much_expired_at_once(self, make_pool: PoolFactory):
        """Bounded everything: an exact answer that needs more cleaning than one scan is refused."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.upsert([h.proxy(f"p{i}", ttl=MIN) for i in range(5)])
        h.advance(2 * MIN)
        with pytest.raises(ScanBudgetExhausted):
            h.pool.inventory("u1")
        h.pool.sweep(10)
        assert h.pool.inventory("u1") == 0

    def test_largest_batches_through_every_write_path(self, make_pool: PoolFactory):
        """Bounded everything, at the bounds: the largest upsert, health batch, extract and
        sweep each change exactly what they say (Redis sends such writes in several commands)."""
        h = make_pool()
        stocked = [f"b{i}" for i in range(1_200)]
        result = h.upsert([h.proxy(pid, ttl=MIN) for pid in stocked], max_size=10_000)
        assert result.inserted == 1_200
        for first in range(0, 1_200, 1_000):  # max_health_batch is 1,000
            h.mark(stocked[first : first + 1_000])
        assert h.pool.inventory("u1") == 1_200
        taken = h.take(1_000, mode=ExtractMode.ALL_OR_NOTHING)
        assert len(set(ids(taken))) == 1_000
        assert h.pool.inventory("u1") == 200
        left = ids(h.take(1_000))
        assert sorted(left) == sorted(set(stocked) - set(ids(taken)))
        assert h.pool.inventory("u1") == 0
        h.stock(*[f"x{i}" for i in range(500)], ttl=MIN)
        h.advance(2 * MIN)
        swept = h.pool.sweep(10_000)
        assert (swept.expired, swept.more) == (1_700, False)
        assert h.pool.upstream_inventory("u1").managed == 0
        h.stock("fresh")
        assert ids(h.take(5)) == ["fresh"]

    @pytest.mark.parametrize("limit", [0, -1, 10_001, "10", 1.5])
    def test_bad_limits(self, make_pool: PoolFactory, limit):
        """短 TTL 清理: sweep's limit is itself bounded."""
        h = make_pool()
        with pytest.raises(InvalidRequest):
            h.pool.sweep(limit)
