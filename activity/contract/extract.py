"""Contract: exclusive extract (ADR-005 "独占提取")."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    InvalidRequest,
    ScanBudgetExhausted,
)
from activity.types import ExtractFilters, ExtractMode, ExtractRequest, PoolOptions, ProxyState

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
AON = ExtractMode.ALL_OR_NOTHING


def _health(state: ProxyState) -> Callable[[PoolHarness, list[str]], None]:
    def depart(h: PoolHarness, leave: list[str]) -> None:
        h.mark(leave, state)

    return depart


def _extracted(h: PoolHarness, leave: list[str]) -> None:
    # "de*" sort before "us*" at the same usable_until: the unfiltered scan takes them first.
    assert sorted(ids(h.take(5)) + ids(h.take(1))) == leave


def _assigned(h: PoolHarness, leave: list[str]) -> None:
    for pid in leave:
        h.pool.assign(h.now, pid, "w1", MIN)


def _drained(h: PoolHarness, leave: list[str]) -> None:
    for pid in leave:
        h.pool.begin_drain(pid, "w1", h.pool.assign(h.now, pid, "w1", MIN).epoch)


def _expired(h: PoolHarness, leave: list[str]) -> None:
    h.advance(MIN)  # their hard expiry; the ten that stay live ten minutes


def _relabelled(h: PoolHarness, leave: list[str]) -> str:
    h.upsert([h.proxy(pid, region="fr", ttl=MIN) for pid in leave])
    return "fr"


#: Ways a proxy stops being an AVAILABLE, unowned "de" proxy; each returns the region it is
#: still AVAILABLE under, if any.
_DEPARTURES: dict[str, Callable[[PoolHarness, list[str]], str | None]] = {
    "unhealthy": _health(ProxyState.UNHEALTHY),
    "suspect": _health(ProxyState.SUSPECT),
    "checking": _health(ProxyState.CHECKING),
    "removed": _health(ProxyState.REMOVED),
    "extracted": _extracted,
    "assigned": _assigned,
    "draining": _drained,
    "expired": _expired,
    "relabelled": _relabelled,
}


class TestExtract:
    def test_partial_returns_what_there_is(self, make_pool: PoolFactory):
        """独占提取 step 5: partial returns up to count."""
        h = make_pool()
        h.stock("p1", "p2")
        result = h.take(5)
        assert (result.requested, result.returned, result.replayed) == (5, 2, False)
        assert h.pool.inventory("u1") == 0

    def test_a_proxy_says_when_a_provider_last_listed_it(self, make_pool: PoolFactory):
        """fetched_at: its insert's fetch time, or its latest refresh's (usage metrics)."""
        h = make_pool()
        first = h.now
        h.stock("a", "b")
        h.advance(timedelta(seconds=30))
        h.upsert([h.proxy("b")])  # listed again: refreshed
        taken = {p.proxy_id: p.fetched_at for p in h.take(2).proxies}
        assert taken == {"a": first, "b": first + timedelta(seconds=30)}

    def test_partial_with_nothing_is_an_empty_answer(self, make_pool: PoolFactory):
        """独占提取 step 5: a complete scan that finds nothing is an empty result, not an error."""
        h = make_pool()
        assert h.take(3).proxies == ()

    def test_all_or_nothing_changes_nothing_on_shortfall(self, make_pool: PoolFactory):
        """独占提取 step 5: all_or_nothing with too few matches fails with zero state change."""
        h = make_pool()
        h.stock("p1", "p2")
        with pytest.raises(InsufficientInventory) as err:
            h.take(3, mode=AON)
        assert (err.value.requested, err.value.available) == (3, 2)
        assert h.pool.inventory("u1") == 2
        assert sorted(ids(h.take(2, mode=AON))) == ["p1", "p2"]

    def test_extract_is_exclusive(self, make_pool: PoolFactory):
        """独占提取 step 6: AVAILABLE -> EXTRACTED; a proxy is handed out once."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(10)])
        first = set(ids(h.take(4, client="a")))
        second = set(ids(h.take(4, client="b")))
        third = set(ids(h.take(4, client="c")))
        assert len(first | second | third) == 10
        assert not (first & second or first & third or second & third)
        assert h.pool.inventory("u1") == 0

    def test_earliest_usable_until_is_handed_out_first(self, make_pool: PoolFactory):
        """独占提取 step 2: candidates are taken in usable_until order (ties by proxy ID)."""
        h = make_pool()
        h.stock("late", ttl=9 * MIN)
        h.stock("soon", ttl=2 * MIN)
        h.stock("mid-b", "mid-a", ttl=5 * MIN)
        assert ids(h.take(4)) == ["soon", "mid-a", "mid-b", "late"]

    @pytest.mark.parametrize(
        ("dimension", "wanted", "other"),
        [
            ("protocol", "socks5", "http"),
            ("region", "de", "us"),
            ("carrier", "vodafone", "att"),
            ("upstream", "u2", "u1"),
        ],
    )
    def test_each_filter(self, make_pool: PoolFactory, dimension, wanted, other):
        """独占提取 step 3: every filter is re-checked on every candidate."""
        h = make_pool()
        base = {"protocol": "http", "region": "us", "carrier": "att"}
        for value, pid in [(wanted, "hit"), (other, "miss")]:
            kwargs = {k: value if k == dimension else v for k, v in base.items()}
            upstream = value if dimension == "upstream" else "u1"
            h.stock(pid, upstream=upstream, **kwargs)
        assert ids(h.take(5, **{dimension: wanted})) == ["hit"]
        assert ids(h.take(5)) == ["miss"]

    def test_filters_combine(self, make_pool: PoolFactory):
        """独占提取 step 3: all filters must match at once."""
        h = make_pool()
        h.stock("us-att", region="us", carrier="att")
        h.stock("us-tmo", region="us", carrier="tmobile")
        h.stock("de-att", region="de", carrier="att")
        assert ids(h.take(5, region="us", carrier="att")) == ["us-att"]

    def test_proxies_without_a_label_do_not_match_that_filter(self, make_pool: PoolFactory):
        """独占提取 step 3: a filter on region never matches a proxy with no region."""
        h = make_pool()
        h.stock("anywhere", region=None, carrier=None)
        assert h.take(1, region="us").proxies == ()
        assert ids(h.take(1)) == ["anywhere"]

    @pytest.mark.parametrize(
        ("labelled", "asked"),
        [
            ("US", "us"),
            ("United States", "united states"),
            ("广东省广州市", "广东省广州市"),
            ("Straße", "STRASSE"),  # case-folded, not only lower-cased
            ("a|b%c", "A|B%C"),  # the hot record's separator, escaped in the key
        ],
    )
    def test_vendor_labels_are_kept_as_sent_and_matched_case_insensitively(
        self, make_pool: PoolFactory, labelled: str, asked: str
    ):
        """Labels as vendors send them (activity/labels.py): kept as sent, found by any case."""
        h = make_pool()
        h.stock("hit", region=labelled, carrier=labelled)
        h.stock("miss", region="elsewhere", carrier="other")
        [proxy] = h.take(5, region=asked, carrier=asked).proxies
        assert (proxy.proxy_id, proxy.region, proxy.carrier) == ("hit", labelled, labelled)

    def test_health_freshness(self, make_pool: PoolFactory):
        """独占提取 step 3: max_health_age skips proxies whose last check is too old."""
        h = make_pool()
        h.stock("old")
        h.advance(30 * SEC)
        h.stock("fresh")
        assert ids(h.take(5, max_health_age=10 * SEC)) == ["fresh"]
        assert ids(h.take(5)) == ["old"]

    def test_min_remaining(self, make_pool: PoolFactory):
        """min_remaining: a client never gets a proxy usable for less than it asked."""
        h = make_pool()
        h.stock("short", ttl=MIN)  # usable for 55 s
        h.stock("long", ttl=10 * MIN)
        assert ids(h.take(5, min_remaining=2 * MIN)) == ["long"]
        with pytest.raises(InsufficientInventory):
            h.take(1, mode=AON, min_remaining=2 * MIN)
        assert ids(h.take(5, min_remaining=30 * SEC)) == ["short"]

    def test_gateway_reserve_is_kept_back(self, make_pool: PoolFactory):
        """独占提取 step 4: reserve_for_gateway matching proxies stay in the pool."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(5)])
        with pytest.raises(InsufficientInventory):
            h.take(4, mode=AON, reserve_for_gateway=2)
        assert h.take(5, reserve_for_gateway=2).returned == 3
        assert h.take(5, reserve_for_gateway=2).returned == 0
        assert h.pool.inventory("u1") == 2
        assert h.take(5).returned == 2

    def test_the_scan_looks_past_count_for_the_reserve(self, make_pool: PoolFactory):
        """独占提取 step 4: the scan collects count + reserve matches, not just count."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(5)])
        assert h.take(1, reserve_for_gateway=2).returned == 1
        # Four left, exactly count + reserve: all or nothing still gets its count.
        assert h.take(2, mode=AON, reserve_for_gateway=2).returned == 2
        # Two left, one short of count + reserve.
        assert h.take(1, reserve_for_gateway=2).returned == 0
        with pytest.raises(InsufficientInventory):
            h.take(1, mode=AON, reserve_for_gateway=2)
        assert h.pool.inventory("u1") == 2

    def test_reserve_counts_only_matching_proxies(self, make_pool: PoolFactory):
        """独占提取 step 4: the reserve is of proxies matching this request's filters."""
        h = make_pool()
        h.stock("us1", "us2", region="us")
        h.stock("de1", "de2", "de3", region="de")
        assert h.take(5, region="us", reserve_for_gateway=2).returned == 0
        assert h.take(5, region="de", reserve_for_gateway=2).returned == 1


class TestExtractReplay:
    """独占提取 steps 1 and 7: the idempotency key's and the request ID's stored answers."""

    def test_idempotent_replay(self, make_pool: PoolFactory):
        """独占提取 step 1/7: the same key and request return the stored response."""
        h = make_pool()
        h.stock("p1", "p2", "p3")
        first = h.take(2, key="k1")
        again = h.take(2, key="k1")
        assert again.replayed and not first.replayed
        assert again.proxies == first.proxies
        assert h.pool.inventory("u1") == 1

    def test_idempotency_conflict(self, make_pool: PoolFactory):
        """独占提取 step 1: the same key with a different request digest is a conflict."""
        h = make_pool()
        h.stock("p1", "p2", "p3")
        h.take(1, key="k1")
        with pytest.raises(IdempotencyConflict):
            h.take(2, key="k1")
        with pytest.raises(IdempotencyConflict):
            h.take(1, key="k1", region="us")
        assert h.pool.inventory("u1") == 2

    def test_idempotency_keys_belong_to_one_client(self, make_pool: PoolFactory):
        """独占提取 step 1: the key is scoped by client ID."""
        h = make_pool()
        h.stock("p1", "p2")
        a = h.take(1, key="k", client="a")
        b = h.take(1, key="k", client="b")
        assert not b.replayed
        assert ids(a) != ids(b)

    def test_replay_ttl_is_capped_by_the_earliest_hard_expiry(self, make_pool: PoolFactory):
        """幂等: the replay lives min(idempotency TTL, earliest returned hard expiry)."""
        h = make_pool(options=PoolOptions(idempotency_ttl=timedelta(minutes=10)))
        h.stock("short", ttl=MIN)
        h.stock("long", ttl=10 * MIN)
        first = h.take(2, key="k1")
        assert first.returned == 2
        h.advance(59 * SEC)
        assert h.take(2, key="k1").replayed
        h.advance(2 * SEC)  # "short" has hit its hard expiry: the replay must not return it
        h.stock("new")
        fresh = h.take(2, key="k1")
        assert not fresh.replayed
        assert ids(fresh) == ["new"]

    def test_replay_ttl_is_the_idempotency_ttl(self, make_pool: PoolFactory):
        """幂等: without early expiry the replay lives exactly the idempotency TTL."""
        h = make_pool(options=PoolOptions(idempotency_ttl=timedelta(seconds=5)))
        h.stock("p1", "p2")
        h.take(1, key="k1")
        h.advance(4 * SEC)
        assert h.take(1, key="k1").replayed
        h.advance(2 * SEC)
        assert not h.take(1, key="k1").replayed

    def test_an_empty_partial_result_is_replayed_too(self, make_pool: PoolFactory):
        """幂等: the stored response is the response, even when it was empty."""
        h = make_pool()
        assert h.take(1, key="k1").returned == 0
        h.stock("p1")
        assert h.take(1, key="k1").replayed
        assert h.pool.inventory("u1") == 1

    def test_request_id_guards_one_low_level_retry(self, make_pool: PoolFactory):
        """幂等: without a client key, the request ID is the internal operation ID."""
        h = make_pool()
        h.stock("p1", "p2")
        first = h.take(1, request_id="req-1")
        again = h.take(1, request_id="req-1")
        assert again.replayed and again.proxies == first.proxies
        assert not h.take(1, request_id="req-2").replayed

    def test_request_id_replay_lives_the_operation_ttl(self, make_pool: PoolFactory):
        """幂等: a request ID guards a retry, not a business key: it lives operation_ttl."""
        h = make_pool(
            options=PoolOptions(operation_ttl=5 * SEC, idempotency_ttl=timedelta(minutes=10))
        )
        h.stock("p1", "p2")
        h.take(1, request_id="req-1")
        h.advance(6 * SEC)
        assert not h.take(1, request_id="req-1").replayed


class TestExtractScan:
    """独占提取 steps 2-3: the bounded scan of the driving index, and what the indexes hold."""

    def test_scan_budget_exhausted_is_not_insufficient(self, make_pool: PoolFactory):
        """独占提取: an incomplete bounded scan is temporarily unavailable, and changes nothing."""
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock(*[f"old{i}" for i in range(8)])
        h.advance(MIN)
        h.stock("fresh")
        for mode in ExtractMode:
            with pytest.raises(ScanBudgetExhausted):
                h.take(1, mode=mode, max_health_age=10 * SEC)
        assert h.pool.inventory("u1") == 9
        assert h.take(5).returned == 5  # nothing was taken by the failed attempts

    def test_drives_from_the_smallest_index(self, make_pool: PoolFactory):
        """独占提取 step 2: the smallest matching filter index drives the scan."""
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock(*[f"us{i}" for i in range(10)], region="us")
        h.stock("de1", "de2", region="de")
        assert sorted(ids(h.take(2, region="de", mode=AON))) == ["de1", "de2"]

    def test_a_complete_scan_at_the_budget_is_an_answer(self, make_pool: PoolFactory):
        """独占提取: exactly scan_budget candidates scanned completely is not 'exhausted'."""
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock("stale")
        h.advance(MIN)
        h.stock(*[f"p{i}" for i in range(4)])
        # All five are in the index and all five are read; one fails the freshness re-check.
        assert h.take(5, max_health_age=10 * SEC).returned == 4

    @pytest.mark.parametrize("departure", sorted(_DEPARTURES))
    def test_a_proxy_leaving_available_leaves_every_index(self, make_pool: PoolFactory, departure):
        """健康状态 / 独占提取: only AVAILABLE, unowned proxies are in the AVAILABLE indexes.

        A member left behind in one filter index changes no result (extract re-checks every
        candidate) but eats the scan budget: here the six that left would make a budget of
        five report ScanBudgetExhausted instead of the empty answer.
        """
        h = make_pool(options=PoolOptions(scan_budget=5))
        stay = h.stock(*[f"us{i}" for i in range(10)], region="us")
        leave = h.stock(*[f"de{i}" for i in range(6)], region="de", ttl=MIN)
        moved_to = _DEPARTURES[departure](h, leave)
        assert h.take(1, region="de").proxies == ()
        expected = {("region", "us"): len(stay), ("region", "de"): 0}
        expected.update(
            {
                (dim, value): len(stay)
                for dim, value in [
                    ("available", ""),
                    ("upstream", "u1"),
                    ("protocol", "http"),
                    ("carrier", "att"),
                ]
            }
        )
        if moved_to is not None:  # still AVAILABLE, under another region
            expected[("region", moved_to)] = len(leave)
            for name in [
                ("available", ""),
                ("upstream", "u1"),
                ("protocol", "http"),
                ("carrier", "att"),
            ]:
                expected[name] += len(leave)
        sizes = {name: h.index_size(*name) for name in expected}
        assert sizes == expected

    def test_owned_proxies_are_not_extracted(self, make_pool: PoolFactory):
        """独占提取 step 3 / Worker 所有权: an assigned proxy is never handed to a client."""
        h = make_pool()
        h.stock("p1", "p2")
        h.pool.assign(h.now, "p1", "w1", MIN)
        assert ids(h.take(5)) == ["p2"]


BAD_REQUESTS = {
    "zero count": {"count": 0},
    "negative count": {"count": -1},
    "count above the cap": {"count": 11},
    "count as a string": {"count": "1"},
    "mode as a string": {"mode": "partial"},
    "unknown protocol filter": {"filters": ExtractFilters(protocol="ftp")},
    "unprintable region filter": {"filters": ExtractFilters(region="us\x00")},
    "region filter over 64 characters": {"filters": ExtractFilters(region="r" * 65)},
    "empty carrier filter": {"filters": ExtractFilters(carrier=" ")},
    "upstream filter with spaces": {"filters": ExtractFilters(upstream="u 1")},
    "negative reserve": {"reserve_for_gateway": -1},
    "zero health age": {"max_health_age": timedelta(0)},
    "negative min_remaining": {"min_remaining": -SEC},
    "key with spaces": {"idempotency_key": "a key"},
    "empty client": {"client_id": ""},
    "filters as a dict": {"filters": {"region": "us"}},
}


class TestExtractInput:
    @pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
    def test_bad_requests_raise_and_change_nothing(self, make_pool: PoolFactory, case):
        """独占提取: bad input gets a typed error before the store is touched."""
        h = make_pool(options=PoolOptions(max_extract_count=10))
        h.stock("p1")
        fields = {"client_id": "c1", "count": 1, **BAD_REQUESTS[case]}
        with pytest.raises(InvalidRequest):
            h.pool.extract(ExtractRequest(**fields))
        assert h.pool.inventory("u1") == 1
