"""Builders for RedisPool tests on a real Redis (test_redis_pool.py,
test_redis_lost_replies.py): a pool of its own prefix with a manual clock, proxies, and stock
made AVAILABLE."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import redis

from activity import (
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    PoolOptions,
    ProxyState,
    RedisPool,
)

MIN = timedelta(minutes=1)


def proxies_at(now: datetime, n: int, prefix: str = "p", ttl: timedelta = 10 * MIN, **kw):
    return [
        FetchedProxy(
            f"{prefix}{i}",
            f"{prefix}-key-{i}",
            f"10.2.{i // 250}.{i % 250}",
            8080,
            "http",
            now + ttl,
            region="us",
            **kw,
        )
        for i in range(n)
    ]


def stock(pool: RedisPool, now: datetime, n: int, prefix: str = "p", **kw) -> list[str]:
    proxies = proxies_at(now, n, prefix, **kw)
    pool.upsert_fetched(FetchedBatch("u1", proxies, 10**6, timedelta(seconds=5), now))
    updates = [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies]
    for start in range(0, len(updates), 1000):
        pool.apply_health(updates[start : start + 1000])
    return [p.proxy_id for p in proxies]


def pool_at(url: str, **kw) -> tuple[RedisPool, ManualClock]:
    clock = ManualClock(datetime.now(UTC))
    client = redis.Redis.from_url(url, socket_timeout=kw.pop("timeout", 5))
    options = PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}", **kw.pop("options", {}))
    return RedisPool(client, options, clock=clock, **kw), clock
