"""MemoryPool beyond the contract: thread safety, the public surface, no secret in errors."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

import activity
from activity import (
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    MemoryPool,
    PoolOptions,
    ProxyState,
    StaticCredentials,
)
from activity.errors import ERROR_CODES, ActivityError, InvalidBatch


def _stocked_pool(n: int) -> tuple[MemoryPool, ManualClock]:
    clock = ManualClock()
    pool = MemoryPool(PoolOptions(), clock=clock)
    now = clock.now()
    proxies = [
        FetchedProxy(
            f"p{i}",
            f"10.1.{i // 250}.{i % 250}:80",
            f"10.1.{i // 250}.{i % 250}",
            80,
            "http",
            now + timedelta(minutes=10),
        )
        for i in range(n)
    ]
    pool.upsert_fetched(FetchedBatch("u1", proxies, n, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])
    return pool, clock


def _race(pool: MemoryPool, extractors: int, count: int) -> list[list[str]]:
    results: list[list[str]] = []
    barrier = threading.Barrier(extractors)

    def worker(i: int) -> None:
        barrier.wait()
        got = pool.extract(ExtractRequest(client_id=f"c{i}", count=count))
        results.append([p.proxy_id for p in got.proxies])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(extractors)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_concurrent_extractors_get_disjoint_sets():
    """独占提取 under threads: 16 extractors, 100 rounds, no proxy handed out twice."""
    for _ in range(100):
        pool, _ = _stocked_pool(200)
        handed = [pid for got in _race(pool, 16, 15) for pid in got]
        assert len(handed) == len(set(handed)) == 200
        assert pool.inventory("u1") == 0


def test_the_public_surface_of_the_architecture_imports():
    """ARCHITECTURE.md "Public surface": the names outside code relies on (RedisPool follows)."""
    for name in [
        "MemoryPool",
        "PoolOptions",
        "FetchedProxy",
        "FetchedBatch",
        "UpsertResult",
        "HealthUpdate",
        "ProxyState",
        "ExtractRequest",
        "ExtractFilters",
        "ExtractMode",
        "ExtractResult",
        "ExtractedProxy",
        "Assignment",
        "UpstreamInventory",
    ]:
        assert hasattr(activity, name), name
    assert {m.name for m in ProxyState} == {
        "FETCHED",
        "CHECKING",
        "AVAILABLE",
        "SUSPECT",
        "UNHEALTHY",
        "DRAINING",
        "EXTRACTED",
        "EXPIRED",
        "REMOVED",
    }
    assert {m.name for m in ExtractMode} == {"PARTIAL", "ALL_OR_NOTHING"}


def test_the_architecture_example_runs_on_memory_pool():
    """The example in ARCHITECTURE.md, on the reference implementation."""
    now = datetime.now(UTC)
    pool = MemoryPool(PoolOptions())
    result = pool.upsert_fetched(
        FetchedBatch(
            upstream_id="u1",
            proxies=[
                FetchedProxy(
                    proxy_id="p1",
                    unique_key="10.0.0.1:8080",
                    host="10.0.0.1",
                    port=8080,
                    protocol="http",
                    expires_at=now + timedelta(minutes=10),
                    region="us",
                    carrier="att",
                    max_concurrency=4,
                )
            ],
            max_size=1000,
            safety_margin=timedelta(seconds=5),
            fetched_at=now,
        )
    )
    assert (result.inserted, result.refreshed, result.dropped) == (1, 0, 0)
    pool.apply_health(
        [HealthUpdate(proxy_id="p1", state=ProxyState.AVAILABLE, checked_at=now, latency_ms=80)]
    )
    res = pool.extract(
        ExtractRequest(
            client_id="c1",
            count=1,
            mode=ExtractMode.ALL_OR_NOTHING,
            filters=ExtractFilters(region="us"),
            idempotency_key="k1",
        )
    )
    assert res.proxies[0].proxy_id == "p1" and res.replayed is False
    assert pool.inventory("u1") == 0
    assert pool.upstream_inventory("u1").managed == 0
    assert pool.sweep(limit=500).expired == 0


def test_error_codes_are_unique_and_complete():
    """The shared code table: one class per code, every error class in it."""
    assert all(issubclass(cls, ActivityError) for cls in ERROR_CODES.values())
    assert len(ERROR_CODES) == len(set(ERROR_CODES.values()))
    for cls in ERROR_CODES.values():
        assert ERROR_CODES[cls.code] is cls


def test_no_secret_in_errors_or_reprs():
    """Invariant 3: passwords and SecretRefs never appear in an error, repr or result."""
    clock = ManualClock()
    creds = StaticCredentials()
    secret = creds.put("user", "hunter2-very-secret")
    pool = MemoryPool(PoolOptions(), clock=clock, credentials=creds)
    now = clock.now()
    proxy = FetchedProxy(
        "p1", "k1", "10.0.0.1", 80, "http", now + timedelta(minutes=5), secret_ref=secret.ref
    )
    seen = [repr(proxy), repr(secret), str(secret.ref)]
    with pytest.raises(InvalidBatch) as err:
        pool.upsert_fetched(FetchedBatch("u1", [proxy, proxy], 10, timedelta(0), now))
    seen += [str(err.value), repr(err.value)]
    pool.upsert_fetched(FetchedBatch("u1", [proxy], 10, timedelta(0), now))
    pool.apply_health([HealthUpdate("p1", ProxyState.AVAILABLE, now)])
    got = pool.extract(ExtractRequest("c1", 1))
    assert got.proxies[0].password == "hunter2-very-secret"
    seen += [repr(got), repr(got.proxies[0])]
    for text in seen:
        assert "hunter2" not in text
        assert secret.ref.ref not in text
