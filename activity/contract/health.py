"""Contract: health state and the AVAILABLE indexes (ADR-005 "健康状态")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import InvalidBatch
from activity.types import HealthUpdate, PoolOptions, ProxyState

SEC = timedelta(seconds=1)


class TestHealth:
    def test_fetched_becomes_available_after_a_healthy_check(self, make_pool: PoolFactory):
        """健康状态: FETCHED -> AVAILABLE enters the AVAILABLE indexes."""
        h = make_pool()
        h.upsert([h.proxy("p1")])
        assert h.take(1).proxies == ()
        result = h.pool.apply_health([HealthUpdate("p1", ProxyState.AVAILABLE, h.now, 40)])
        assert result.applied == 1
        assert ids(h.take(1)) == ["p1"]

    @pytest.mark.parametrize(
        "state",
        [ProxyState.CHECKING, ProxyState.SUSPECT, ProxyState.UNHEALTHY, ProxyState.REMOVED],
    )
    def test_leaving_available_leaves_every_index(self, make_pool: PoolFactory, state):
        """健康状态: SUSPECT / UNHEALTHY / REMOVED (and a new check) leave every AVAILABLE index."""
        h = make_pool()
        h.stock("p1", region="us", carrier="att", protocol="socks5")
        h.mark(["p1"], state)
        assert h.take(1).proxies == ()
        for dim, value in [
            ("region", "us"),
            ("carrier", "att"),
            ("protocol", "socks5"),
            ("upstream", "u1"),
        ]:
            assert h.take(1, **{dim: value}).proxies == ()

    def test_back_to_available_reenters(self, make_pool: PoolFactory):
        """健康状态: a SUSPECT proxy that checks healthy again is handed out again."""
        h = make_pool()
        h.stock("p1")
        h.mark(["p1"], ProxyState.SUSPECT)
        h.advance(SEC)
        h.mark(["p1"], ProxyState.AVAILABLE)
        assert ids(h.take(1)) == ["p1"]

    def test_removed_leaves_inventory_unhealthy_does_not(self, make_pool: PoolFactory):
        """库存真值: REMOVED decrements inventory; an unhealthy proxy is still unextracted."""
        h = make_pool()
        h.stock("p1", "p2")
        h.mark(["p1"], ProxyState.UNHEALTHY)
        assert h.pool.inventory("u1") == 2
        h.mark(["p2"], ProxyState.REMOVED)
        assert h.pool.inventory("u1") == 1

    def test_available_after_usable_until_is_not_indexed(self, make_pool: PoolFactory):
        """健康状态: only proxies before usable_until are in the AVAILABLE indexes."""
        h = make_pool()
        h.upsert([h.proxy("p1", ttl=30 * SEC)], margin=10 * SEC)
        h.advance(21 * SEC)  # past usable_until, before the hard expiry
        h.mark(["p1"])
        assert h.take(1).proxies == ()
        assert h.pool.inventory("u1") == 1

    def test_missing_terminal_and_stale_updates_are_counted_not_applied(self, make_pool):
        """健康状态: checker results for gone, extracted or newer-checked proxies change nothing."""
        h = make_pool()
        h.stock("p1", "p2")
        h.take(1)  # extracts p1 (earliest usable_until, then ID order)
        older = h.now - SEC
        h.advance(SEC)
        h.mark(["p2"], ProxyState.AVAILABLE)
        result = h.pool.apply_health(
            [
                HealthUpdate("nope", ProxyState.AVAILABLE, h.now),
                HealthUpdate("p1", ProxyState.AVAILABLE, h.now),
                HealthUpdate("p2", ProxyState.UNHEALTHY, older, failure_reason="timeout"),
            ]
        )
        assert (result.applied, result.missing, result.ignored, result.stale) == (0, 1, 1, 1)
        assert ids(h.take(2)) == ["p2"]

    def test_health_applies_to_an_expired_record_as_missing(self, make_pool: PoolFactory):
        """健康状态 + hard TTL: a proxy past its hard expiry cannot be revived by a check."""
        h = make_pool()
        h.upsert([h.proxy("p1", ttl=10 * SEC)], margin=SEC)
        h.advance(11 * SEC)
        assert h.pool.apply_health([HealthUpdate("p1", ProxyState.AVAILABLE, h.now)]).missing == 1


def _naive() -> datetime:
    return datetime(2026, 1, 1)  # noqa: DTZ001 - deliberately naive


BAD_UPDATES = {
    "naive checked_at": lambda h: [HealthUpdate("p1", ProxyState.AVAILABLE, _naive())],
    "extracted is not a health state": lambda h: [HealthUpdate("p1", ProxyState.EXTRACTED, h.now)],
    "draining is not a health state": lambda h: [HealthUpdate("p1", ProxyState.DRAINING, h.now)],
    "state as a plain string": lambda h: [HealthUpdate("p1", "available", h.now)],
    "duplicate proxy": lambda h: [HealthUpdate("p1", ProxyState.AVAILABLE, h.now)] * 2,
    "negative latency": lambda h: [HealthUpdate("p1", ProxyState.AVAILABLE, h.now, -1)],
    "oversize": lambda h: [HealthUpdate(f"x{i}", ProxyState.AVAILABLE, h.now) for i in range(6)],
    "reason too long": lambda h: [
        HealthUpdate("p1", ProxyState.UNHEALTHY, h.now, failure_reason="x" * 201)
    ],
    "not a list": lambda h: HealthUpdate("p1", ProxyState.AVAILABLE, h.now),
    "checked before 1970": lambda h: [
        HealthUpdate("p1", ProxyState.AVAILABLE, datetime(1969, 12, 31, tzinfo=UTC))
    ],
    "checked in the future": lambda h: [
        HealthUpdate("p1", ProxyState.AVAILABLE, h.now + timedelta(minutes=2))
    ],
}


class TestHealthInput:
    @pytest.mark.parametrize("case", sorted(BAD_UPDATES))
    def test_bad_health_batches_raise_and_change_nothing(self, make_pool: PoolFactory, case):
        """健康状态: a malformed batch is refused whole, before any record changes."""
        h = make_pool(options=PoolOptions(max_health_batch=6))
        h.stock("p1", "p2")
        h.advance(SEC)
        updates = BAD_UPDATES[case](h)
        if isinstance(updates, list):  # a valid update rides along and must not apply either
            updates = [HealthUpdate("p2", ProxyState.UNHEALTHY, h.now), *updates]
        with pytest.raises(InvalidBatch):
            h.pool.apply_health(updates)
        assert sorted(ids(h.take(2))) == ["p1", "p2"]
