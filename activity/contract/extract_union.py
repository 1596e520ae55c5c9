"""Contract: an extract filter naming a set of values draws from any of them (a client allowed
several upstreams, regions or protocols that names none draws from all it is allowed)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    InvalidRequest,
    QuotaExceeded,
    ScanBudgetExhausted,
)
from activity.types import (
    MAX_FILTER_VALUES,
    CallQuota,
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    PoolOptions,
)

MIN = timedelta(minutes=1)
AON = ExtractMode.ALL_OR_NOTHING


class TestExtractAnyOf:
    def test_draws_from_each_named_upstream_and_no_other(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a1", "a2", upstream="ua")
        h.stock("b1", upstream="ub")
        h.stock("c1", "c2", upstream="uc")
        got = ids(h.take(10, upstream=frozenset({"ua", "ub"})))
        assert sorted(got) == ["a1", "a2", "b1"]
        assert h.pool.inventory("uc") == 2

    def test_the_union_is_taken_soonest_usable_until_first(self, make_pool: PoolFactory):
        """Across the union the order is the one index's: usable_until, then the earlier value's
        index on equal usable_until (values sorted), then proxy ID."""
        h = make_pool()
        h.stock("b-late", upstream="ub", ttl=9 * MIN)
        h.stock("a-mid", upstream="ua", ttl=5 * MIN)
        h.stock("b-soon", upstream="ub", ttl=2 * MIN)
        h.stock("b-tie", upstream="ub", ttl=7 * MIN)
        h.stock("a-tie", upstream="ua", ttl=7 * MIN)
        assert ids(h.take(10, upstream=frozenset({"ub", "ua"}))) == [
            "b-soon",
            "a-mid",
            "a-tie",
            "b-tie",
            "b-late",
        ]

    def test_a_set_of_one_is_that_value(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a1", upstream="ua")
        h.stock("b1", upstream="ub")
        assert ids(h.take(5, upstream=frozenset({"ub"}))) == ["b1"]

    def test_regions_match_in_their_label_form_and_combine_with_other_filters(
        self, make_pool: PoolFactory
    ):
        h = make_pool()
        h.stock("us-http", region="US")
        h.stock("de-socks", region="de", protocol="socks5")
        h.stock("de-http", region="DE")
        h.stock("fr-http", region="fr")
        got = ids(h.take(5, region=frozenset({"us", "De", "DE"}), protocol="http"))
        assert sorted(got) == ["de-http", "us-http"]

    def test_the_gateway_reserve_is_of_the_whole_union(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a1", "a2", upstream="ua")
        h.stock("b1", upstream="ub")
        both = frozenset({"ua", "ub"})
        with pytest.raises(InsufficientInventory):
            h.take(2, mode=AON, upstream=both, reserve_for_gateway=2)
        assert h.take(5, upstream=both, reserve_for_gateway=2).returned == 1
        assert h.pool.inventory("ua") + h.pool.inventory("ub") == 2

    def test_one_scan_budget_for_the_union(self, make_pool: PoolFactory):
        """The union's indexes share the budget: more stale candidates than the budget across
        them is temporarily unavailable, not an empty answer."""
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock("a0", "a1", "a2", upstream="ua")
        h.stock("b0", "b1", "b2", upstream="ub")
        h.advance(MIN)
        h.stock("fresh", upstream="uc")
        for name in ("c0", "c1", "c2", "c3", "c4", "c5"):  # a larger index, not driving
            h.stock(name, upstream="ud")
        both = frozenset({"ua", "ub"})
        with pytest.raises(ScanBudgetExhausted):
            h.take(1, upstream=both, max_health_age=timedelta(seconds=10))
        assert h.take(5, upstream=both).returned == 5  # the refused call took nothing
        assert h.pool.inventory("ua") + h.pool.inventory("ub") == 1

    def test_drives_from_the_smaller_of_the_union_and_the_other_filters(
        self, make_pool: PoolFactory
    ):
        h = make_pool(options=PoolOptions(scan_budget=4))
        h.stock(*[f"a{i}" for i in range(6)], upstream="ua", region="us")
        h.stock(*[f"b{i}" for i in range(6)], upstream="ub", region="us")
        h.stock("a-de", upstream="ua", region="de")
        h.stock("b-de", upstream="ub", region="de")
        got = ids(h.take(3, upstream=frozenset({"ua", "ub"}), region="de"))
        assert sorted(got) == ["a-de", "b-de"]

    def test_replay_and_conflict_across_the_union(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a1", "a2", upstream="ua")
        h.stock("b1", upstream="ub")
        both = frozenset({"ua", "ub"})
        first = h.take(2, key="k1", upstream=both)
        again = h.take(2, key="k1", upstream=frozenset({"ub", "ua"}))
        assert again.replayed and again.proxies == first.proxies
        with pytest.raises(IdempotencyConflict):
            h.take(2, key="k1", upstream=frozenset({"ua"}))

    def test_a_set_of_one_replays_the_same_call_naming_the_value(self, make_pool: PoolFactory):
        """The request digest of {"ua"} is that of "ua": a retry that names the one value the
        client is allowed replays its first attempt."""
        h = make_pool()
        h.stock("a1", "a2", upstream="ua")
        first = h.take(1, key="k1", upstream=frozenset({"ua"}))
        again = h.take(1, key="k1", upstream="ua")
        assert again.replayed and again.proxies == first.proxies

    def test_the_proxy_quota_counts_across_the_union(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a1", "a2", upstream="ua")
        h.stock("b1", "b2", upstream="ub")
        quota = CallQuota(calls=100, proxies=3)
        both = frozenset({"ua", "ub"})
        assert h.take(2, upstream=both, quota=quota).returned == 2
        with pytest.raises(QuotaExceeded):
            h.take(2, upstream=both, quota=quota)
        assert h.take(1, upstream=both, quota=quota).returned == 1


BAD_SETS = {
    "empty set": ExtractFilters(upstream=frozenset()),
    "too many values": ExtractFilters(
        upstream=frozenset(f"u{i}" for i in range(MAX_FILTER_VALUES + 1))
    ),
    "a bad value among good ones": ExtractFilters(upstream=frozenset({"ua", "u b"})),
    "an unknown protocol among known ones": ExtractFilters(protocol=frozenset({"http", "ftp"})),
    "a non-text value": ExtractFilters(region=frozenset({"us", 7})),  # type: ignore[arg-type]
    "a list, not a set": ExtractFilters(upstream=["ua", "ub"]),  # type: ignore[arg-type]
}


class TestExtractAnyOfInput:
    @pytest.mark.parametrize("case", sorted(BAD_SETS))
    def test_bad_sets_raise_and_change_nothing(self, make_pool: PoolFactory, case):
        h = make_pool()
        h.stock("p1", upstream="ua")
        with pytest.raises(InvalidRequest):
            h.pool.extract(ExtractRequest(client_id="c1", count=1, filters=BAD_SETS[case]))
        assert h.pool.inventory("ua") == 1

    def test_the_most_values_a_set_may_name(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", upstream="u0")
        many = frozenset(f"u{i}" for i in range(MAX_FILTER_VALUES))
        assert ids(h.take(5, upstream=many)) == ["p1"]
