"""Contract: a client's rate limits (``CallQuota``), checked and charged atomically with its
extract (one step, so concurrent calls never go over a limit together and nothing is reserved
and given back), and ``charge_call`` for calls refused before the pool is asked."""

from __future__ import annotations

import contextlib
import random
from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    InvalidRequest,
    QuotaExceeded,
    ScanBudgetExhausted,
)
from activity.types import CallQuota, ExtractMode, PoolOptions

MS = timedelta(milliseconds=1)
SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
AON = ExtractMode.ALL_OR_NOTHING
#: Room enough never to refuse, for tests about the other limit.
MANY = 1_000_000


def quota(calls: int = MANY, proxies: int = MANY) -> CallQuota:
    return CallQuota(calls=calls, proxies=proxies)


def refused(call, reason: str) -> QuotaExceeded:
    with pytest.raises(QuotaExceeded) as caught:
        call()
    assert caught.value.code == "quota_exceeded"
    assert caught.value.reason == reason
    return caught.value


class TestQuota:
    def test_calls_are_limited_per_window(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(5)])
        q = quota(calls=3)
        assert [h.take(1, quota=q).returned for _ in range(3)] == [1, 1, 1]
        err = refused(lambda: h.take(1, quota=q), "calls")
        assert err.left == 0
        assert err.retry_after_ms == 1001  # 3 calls at the window's start: its end, + 1 ms
        assert h.pool.inventory("u1") == 2  # the refused call took nothing

    def test_every_call_counts_a_refused_one_too(self, make_pool: PoolFactory):
        """A conflict, an all-or-nothing shortfall, a replay and charge_call each take a call."""
        h = make_pool()
        h.stock("p1")
        q = quota(calls=5)
        h.take(1, key="k1", quota=q)  # 1
        assert h.take(1, key="k1", quota=q).replayed  # 2: a replay is a call
        with pytest.raises(IdempotencyConflict):
            h.take(2, key="k1", quota=q)  # 3
        with pytest.raises(InsufficientInventory):
            h.take(1, mode=AON, quota=q)  # 4
        h.pool.charge_call("c1", q)  # 5
        refused(lambda: h.take(1, quota=q), "calls")
        refused(lambda: h.pool.charge_call("c1", q), "calls")

    def test_an_incomplete_scan_keeps_the_call_unit(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock(*[f"old{i}" for i in range(8)])
        h.advance(MIN)
        h.stock("fresh")
        q = quota(calls=2)
        with pytest.raises(ScanBudgetExhausted):
            h.take(1, quota=q, max_health_age=10 * SEC)
        h.pool.charge_call("c1", q)
        refused(lambda: h.pool.charge_call("c1", q), "calls")

    def test_proxies_must_fit_and_only_the_returned_are_charged(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", "p2")
        q = quota(proxies=5)
        assert h.take(5, quota=q).returned == 2  # 5 fit; the 2 returned are charged
        h.stock(*[f"q{i}" for i in range(10)])
        err = refused(lambda: h.take(4, quota=q), "proxies")  # 2 + 4 > 5
        assert err.left == 3
        assert h.pool.inventory("u1") == 10  # nothing taken
        assert h.take(3, quota=q).returned == 3
        refused(lambda: h.take(1, quota=q), "proxies")

    def test_a_call_refused_for_its_proxies_keeps_its_call_unit(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", "p2")
        q = quota(calls=2, proxies=1)
        h.take(1, quota=q)
        refused(lambda: h.take(1, quota=q), "proxies")
        refused(lambda: h.take(1, quota=q), "calls")  # the refused call's unit counted

    def test_a_count_above_the_limit_never_fits(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", "p2", "p3", "p4")
        err = refused(lambda: h.take(4, quota=quota(proxies=3)), "proxies")
        assert err.retry_after_ms == 120_000  # two windows: the longest wait there is
        assert err.left == 3

    def test_a_replay_and_a_failed_extract_charge_no_proxy(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", "p2", "p3")
        q = quota(proxies=4)
        assert h.take(2, key="r1", quota=q).returned == 2
        assert h.take(2, key="r1", quota=q).replayed
        with pytest.raises(InsufficientInventory):
            h.take(2, mode=AON, quota=q)
        assert h.take(2, quota=q).returned == 1  # 2 + 0 + 0 + 1: room for 1 more only
        refused(lambda: h.take(2, quota=q), "proxies")

    def test_a_replay_is_answered_when_its_proxies_would_not_fit(self, make_pool: PoolFactory):
        """A replay hands out no new proxy, so only its call unit must fit."""
        h = make_pool()
        h.stock("p1", "p2")
        q = quota(proxies=2)
        first = h.take(2, key="r1", quota=q)
        again = h.take(2, key="r1", quota=q)
        assert again.replayed and ids(again) == ids(first)

    def test_limits_are_per_client_and_per_limit_value(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(6)])
        h.take(1, client="a", quota=quota(calls=1))
        h.take(1, client="b", quota=quota(calls=1))
        refused(lambda: h.take(1, client="a", quota=quota(calls=1)), "calls")
        # A changed limit counts afresh (its own counter).
        assert h.take(1, client="a", quota=quota(calls=2)).returned == 1

    def test_an_extract_without_quota_counts_nothing(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", "p2")
        q = quota(calls=1, proxies=1)
        h.take(1)
        assert h.take(1, quota=q).returned == 1

    def test_the_previous_window_decays(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(20)])
        q = quota(proxies=10)
        h.take(8, quota=q)  # at the start of a minute window
        h.advance(MIN)
        h.take(2, quota=q)  # 8 (previous window, whole) + 2
        # floor(8 * (1 - t/60 s)) must fall to 5 for 3 more: 15 s later (plus 1 ms).
        err = refused(lambda: h.take(3, quota=q), "proxies")
        assert err.retry_after_ms == 15_001
        h.advance(15 * SEC)
        refused(lambda: h.take(3, quota=q), "proxies")
        h.advance(MS)
        assert h.take(3, quota=q).returned == 3

    def test_a_window_full_on_its_own_waits_into_the_next(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(20)])
        q = quota(proxies=10)
        h.advance(30 * SEC)
        h.take(10, quota=q)
        # The 10 must become the previous window's (in 30 s) and decay to 6, i.e. below 7
        # (another 18 s), plus 1 ms.
        err = refused(lambda: h.take(4, quota=q), "proxies")
        assert err.retry_after_ms == 30_000 + 18_000 + 1
        h.advance(timedelta(milliseconds=err.retry_after_ms) - MS)
        refused(lambda: h.take(4, quota=q), "proxies")
        h.advance(MS)
        assert h.take(4, quota=q).returned == 4

    def test_retry_after_is_the_first_moment_that_fits(self, make_pool: PoolFactory):
        """Random histories: a refused call fits after ``retry_after_ms`` and not 1 ms sooner
        (a refused call takes no proxy, so probing changes nothing)."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(700)], ttl=timedelta(hours=2))
        rng = random.Random(7)
        checked = 0
        for case in range(12):
            limit = rng.choice([3, 10])
            client, q = f"r{case}", quota(proxies=limit)
            for _ in range(3):
                h.advance(rng.randrange(0, 40_000) * MS)
                with contextlib.suppress(QuotaExceeded):
                    h.take(rng.randrange(1, limit + 1), client=client, quota=q)
            cost = rng.randrange(1, limit + 1)
            try:
                h.take(cost, client=client, quota=q)
                continue
            except QuotaExceeded as exc:
                wait = exc.retry_after_ms
            assert 0 < wait <= 120_000
            h.advance((wait - 1) * MS)
            refused(lambda c=client, q=q, n=cost: h.take(n, client=c, quota=q), "proxies")
            h.advance(MS)
            assert h.take(cost, client=client, quota=q).returned == cost
            checked += 1
        assert checked >= 4


class TestQuotaInput:
    @pytest.mark.parametrize(
        "bad",
        [
            CallQuota(calls=0, proxies=1),
            CallQuota(calls=1, proxies=-1),
            CallQuota(calls=1, proxies=10**8),
            CallQuota(calls=1, proxies=1, call_window=timedelta(0)),
            CallQuota(calls=True, proxies=1),  # type: ignore[arg-type]
            "1/s",
        ],
    )
    def test_a_bad_quota_is_refused_and_changes_nothing(self, make_pool: PoolFactory, bad):
        h: PoolHarness = make_pool()
        h.stock("p1")
        with pytest.raises(InvalidRequest):
            h.take(1, quota=bad)
        with pytest.raises(InvalidRequest):
            h.pool.charge_call("c1", bad)
        assert h.pool.inventory("u1") == 1

    def test_charge_call_needs_a_quota(self, make_pool: PoolFactory):
        with pytest.raises(InvalidRequest):
            make_pool().pool.charge_call("c1", None)  # type: ignore[arg-type]
