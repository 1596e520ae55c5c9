"""Contract: exclusivity under concurrency (ADR-005 "100 轮并发 Extract", assign vs extract)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import OwnershipConflict, QuotaExceeded
from activity.types import CallQuota, ExtractResult

MIN = timedelta(minutes=1)
ROUNDS = 100
THREADS = 16


def _together(calls: list[Callable[[], object]]) -> list[object]:
    """Run the calls on their own threads, released at once; return results or exceptions."""
    results: list[object] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


class TestConcurrency:
    def test_concurrent_extracts_return_disjoint_sets(self, make_pool: PoolFactory):
        """100 轮并发 Extract: the returned sets never intersect; their union is what left."""
        h = make_pool()
        for round_ in range(ROUNDS):
            stock = h.stock(*[f"r{round_}-p{i}" for i in range(40)])
            before = h.pool.inventory("u1")
            calls = [lambda i=i: h.take(3, client=f"c{i}") for i in range(THREADS)]
            results = _together(calls)
            handed = [pid for r in results for pid in ids(r)]
            assert len(handed) == len(set(handed))
            assert set(handed) <= set(stock)
            assert before - h.pool.inventory("u1") == len(handed) == 40

    def test_concurrent_extracts_never_go_over_a_quota_together(self, make_pool: PoolFactory):
        """One client's calls racing: the proxies limit holds exactly, every call is counted."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(200)])
        rounds = 5
        quota = CallQuota(calls=rounds * THREADS + 5, proxies=100)
        handed: list[str] = []
        for _ in range(rounds):
            results = _together([lambda: h.take(3, quota=quota) for _ in range(THREADS)])
            handed += [pid for r in results if not isinstance(r, Exception) for pid in ids(r)]
            assert all(isinstance(r, QuotaExceeded | ExtractResult) for r in results), results
        assert len(handed) == len(set(handed)) == 99  # 33 extracts of 3 fit in 100, not one more
        # Every call took its unit (a refused one too): 5 calls are left, not one more.
        for _ in range(5):
            h.pool.charge_call("c1", quota)
        with pytest.raises(QuotaExceeded):
            h.pool.charge_call("c1", quota)

    def test_assign_and_extract_racing_for_one_proxy(self, make_pool: PoolFactory):
        """Worker 所有权: assign and extract racing for one proxy: exactly one wins."""
        h = make_pool()
        for round_ in range(ROUNDS):
            pid = f"r{round_}"
            h.stock(pid)
            calls: list[Callable[[], object]] = []
            for i in range(THREADS // 2):
                calls.append(lambda i=i: h.take(1, client=f"c{i}"))
                calls.append(lambda i=i, pid=pid: h.pool.assign(h.now, pid, f"w{i}", MIN))
            results = _together(calls)
            extracted = [r for r in results[0::2] if ids(r)]
            assigned = [r for r in results[1::2] if not isinstance(r, Exception)]
            losers = [r for r in results[1::2] if isinstance(r, Exception)]
            assert len(extracted) + len(assigned) == 1
            assert all(isinstance(e, OwnershipConflict) for e in losers)
            if assigned:
                h.pool.expire(h.now + 2 * MIN, 10)  # hand it back; the next round starts clean
                h.take(1, client="cleanup")
