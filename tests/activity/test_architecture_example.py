"""The example of ARCHITECTURE.md's "Public surface", on both pool implementations."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis

from activity import (
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    MemoryPool,
    PoolOptions,
    ProxyState,
    RedisPool,
)


def make(backend: str, redis_url: str):
    if backend == "memory":
        return MemoryPool(PoolOptions())
    # A plain client, as in the example: RedisPool bounds its calls itself.
    return RedisPool(
        redis.Redis.from_url(redis_url), PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}")
    )


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_the_architecture_example_runs(backend, redis_url):
    """ARCHITECTURE "Public surface": the example runs unchanged on either implementation."""
    now = datetime.now(UTC)
    pool = make(backend, redis_url)
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
