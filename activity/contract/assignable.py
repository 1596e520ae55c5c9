"""Contract: the ownership manager's candidates (``ControlStore.assignable``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory
from activity.errors import InvalidRequest
from activity.types import PoolOptions, ProxyState

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


def listed(h, upstream="u1", limit=10, min_remaining=timedelta(0)):
    return [p.proxy_id for p in h.pool.assignable(upstream, limit, min_remaining).proxies]


class TestAssignable:
    def test_the_longest_usable_first(self, make_pool: PoolFactory):
        """The other end of the index from extract's: a gateway keeps what lives longest."""
        h = make_pool()
        h.stock("soon", ttl=2 * MIN)
        h.stock("late", ttl=9 * MIN)
        h.stock("mid-a", "mid-b", ttl=5 * MIN)
        assert listed(h) == ["late", "mid-b", "mid-a", "soon"]

    def test_each_candidate_says_its_capacity_and_usable_until(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", max_concurrency=7, ttl=5 * MIN)
        [candidate] = h.pool.assignable("u1", 10, timedelta(0)).proxies
        assert candidate.max_concurrency == 7
        assert h.now < candidate.usable_until <= h.now + 5 * MIN

    def test_only_available_unowned_proxies_of_the_upstream(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("free", "owned", "sick", "suspect")
        h.stock("taken", ttl=2 * MIN)
        h.stock("elsewhere", upstream="u2")
        h.upsert([h.proxy("fetched")])
        h.pool.assign(h.now, "owned", "w1", MIN)
        h.mark(["sick"], ProxyState.UNHEALTHY)
        h.mark(["suspect"], ProxyState.SUSPECT)
        assert [p.proxy_id for p in h.take(1).proxies] == ["taken"]  # the soonest usable
        assert listed(h) == ["free"]
        assert listed(h, "u2") == ["elsewhere"]

    def test_min_remaining_leaves_out_the_short_lived(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("short", ttl=40 * SEC)
        h.stock("long", ttl=5 * MIN)
        assert listed(h, min_remaining=MIN) == ["long"]
        assert listed(h, min_remaining=timedelta(0)) == ["long", "short"]

    def test_expired_proxies_are_never_candidates(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("short", ttl=20 * SEC)
        h.stock("long", ttl=5 * MIN)
        h.advance(30 * SEC)
        assert listed(h) == ["long"]

    def test_at_most_the_limit_and_whether_more_follow(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(5)])
        first = h.pool.assignable("u1", 3, timedelta(0))
        assert len(first.proxies) == 3 and not first.complete
        whole = h.pool.assignable("u1", 5, timedelta(0))
        assert len(whole.proxies) == 5 and whole.complete

    def test_a_candidate_once_assigned_is_one_no_more(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1", "p2")
        [first, *_] = listed(h)
        h.pool.assign(h.now, first, "w1", MIN)
        assert first not in listed(h)
        assert len(listed(h)) == 1

    def test_an_unknown_upstream_has_none(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("p1")
        answer = h.pool.assignable("nobody", 10, timedelta(0))
        assert answer.proxies == () and answer.complete


BAD = {
    "upstream with spaces": ("u 1", 10, timedelta(0)),
    "empty upstream": ("", 10, timedelta(0)),
    "zero limit": ("u1", 0, timedelta(0)),
    "limit over the scan budget": ("u1", 6, timedelta(0)),
    "limit as text": ("u1", "10", timedelta(0)),
    "negative min_remaining": ("u1", 10, -SEC),
    "min_remaining as seconds": ("u1", 10, 30),
}


class TestAssignableInput:
    @pytest.mark.parametrize("case", sorted(BAD))
    def test_bad_arguments_raise(self, make_pool: PoolFactory, case):
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock("p1")
        with pytest.raises(InvalidRequest):
            h.pool.assignable(*BAD[case])
