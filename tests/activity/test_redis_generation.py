"""The pool generation on Redis (ADR-005 "故障语义": losing Redis ends a generation).

A restarted Redis is empty: providers hand out the same proxies again and the pool hands them
out again. Exclusivity does not carry over; the generation in every extract answer is how a
client tells that proxies it holds came from a generation that has ended.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import redis

from activity import (
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    PoolOptions,
    ProxyState,
    RedisPool,
)
from activity.contract.harness import ManualClock

MIN = timedelta(minutes=1)


def _pool(url: str) -> tuple[RedisPool, ManualClock]:
    clock = ManualClock(datetime.now(UTC))
    client = redis.Redis.from_url(url, socket_timeout=5)
    return RedisPool(client, PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}"), clock=clock), clock


def _stock(pool: RedisPool, now: datetime) -> None:
    """The same two proxies a provider would hand out again after a restart."""
    proxies = [
        FetchedProxy(f"p{i}", f"exit-{i}", f"10.3.0.{i}", 8080, "http", now + 10 * MIN)
        for i in range(2)
    ]
    pool.upsert_fetched(FetchedBatch("u1", proxies, 100, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])


def test_a_restarted_redis_is_a_new_generation_and_hands_the_same_proxies_out_again(
    private_redis,
):
    server = private_redis()
    pool, clock = _pool(server.url)
    _stock(pool, clock.now())
    before = pool.extract(ExtractRequest("c1", 2))
    assert before.generation == pool.extract(ExtractRequest("c2", 1)).generation
    server.restart()
    _stock(pool, clock.now())  # the provider refills the empty Redis with the same proxies
    after = pool.extract(ExtractRequest("c2", 2))
    assert {p.proxy_id for p in after.proxies} == {p.proxy_id for p in before.proxies}
    assert after.generation != before.generation
    pool.close()


def test_a_generation_made_by_an_extract_on_an_empty_namespace_does_not_outlive_it(redis_url):
    """The generation lives in the namespace's meta key: made by an extract that found nothing,
    it still expires (an idle namespace frees itself); a later write extends it with the rest."""
    pool, clock = _pool(redis_url)
    first = pool.extract(ExtractRequest("c1", 1)).generation
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{pool.options.prefix}:*", count=1000))
    assert keys, "the generation is stored in the namespace"
    assert all(0 < client.pttl(key) <= 60_000 for key in keys), keys
    _stock(pool, clock.now())
    assert pool.extract(ExtractRequest("c1", 1)).generation == first
    assert all(client.pttl(key) > 9 * 60_000 for key in keys)
    client.close()
    pool.close()
