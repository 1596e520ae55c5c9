"""A time-compressed short-TTL soak on real Redis (ADR-005 "30 秒 TTL 持续写入").


Two-second TTLs, refreshed continuously for sixty seconds of pool time with sweep running every
step: stored records and index members stay bounded by the live set, and inventory equals the
true number of unextracted live proxies at every sample (a Python model keeps that truth).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import redis

from activity import (
    ExtractFilters,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    PoolOptions,
    ProxyState,
    RedisPool,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

TTL = timedelta(seconds=2)
MARGIN = timedelta(milliseconds=200)
STEP = timedelta(milliseconds=100)
STEPS = 600  # 60 s of pool time
UNIVERSE = [f"p{i}" for i in range(400)]
UPSTREAMS = ("u1", "u2")


@dataclass
class Life:
    upstream: str
    expires: datetime
    extracted: bool = False


def test_short_ttl_soak_stays_bounded_and_exact(redis_url):
    rng = random.Random(7)
    clock = ManualClock(datetime(2026, 5, 1, tzinfo=UTC))
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    pool = RedisPool(client, PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}"), clock=clock)
    ns = f"{pool.options.prefix}:{{activity}}:"
    model: dict[str, Life] = {}
    samples = 0
    for step in range(STEPS):
        now = clock.now()
        for upstream in UPSTREAMS:
            ids = [
                p for p in rng.sample(UNIVERSE, 60) if int(p[1:]) % 2 == UPSTREAMS.index(upstream)
            ]
            batch = [
                FetchedProxy(p, f"key-{p}", "10.9.0.1", 1000 + int(p[1:]), "http", now + TTL)
                for p in ids
            ]
            pool.upsert_fetched(FetchedBatch(upstream, batch, 10_000, MARGIN, now))
            for p in ids:
                life = model.get(p)
                if life is None or life.expires <= now:
                    model[p] = Life(upstream, now + TTL)  # a new lifecycle
                elif not life.extracted:
                    life.expires = now + TTL  # a refresh; EXTRACTED never re-enters
            pool.apply_health([HealthUpdate(p, ProxyState.AVAILABLE, now) for p in ids])
        got = pool.extract(
            ExtractRequest(
                "c", rng.randint(1, 8), filters=ExtractFilters(upstream=rng.choice(UPSTREAMS))
            )
        )
        for proxy in got.proxies:
            life = model[proxy.proxy_id]
            assert not life.extracted and life.expires > now
            life.extracted = True
        sweep = pool.sweep(limit=1000)
        assert not sweep.more
        live = {p: life for p, life in model.items() if life.expires > now}
        if step % 10 == 0:
            samples += 1
            for upstream in UPSTREAMS:
                truth = sum(
                    1 for life in live.values() if life.upstream == upstream and not life.extracted
                )
                assert pool.inventory(upstream) == truth, (step, upstream)
            assert client.hlen(ns + "records") <= len(live)
            assert client.zcard(ns + "expiry") <= len(live)
            assert client.hlen(ns + "unique") <= len(live)
            unextracted = sum(1 for life in live.values() if not life.extracted)
            for index in ("available", "upstream:u1", "upstream:u2", "protocol:http"):
                assert client.zcard(ns + index) <= unextracted, index
        clock.advance(STEP)
    assert samples == STEPS // 10
