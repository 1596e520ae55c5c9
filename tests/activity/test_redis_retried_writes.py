"""Writes whose outcome is unknown, sent again by their caller (a reply lost on the wire, or a
failover between the write and its reply): each is safe to repeat, by an operation ID or by
construction, and a write applied twice leaves the pool as applying it once would
(docs/activity-pool.md "Retried writes"). A relay in front of the run's Redis (the ``relay``
fixture, tests/activity/conftest.py) cuts replies after the server ran the call."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import redis

from activity import (
    ExtractRequest,
    FetchedBatch,
    HealthUpdate,
    ManualClock,
    PoolOptions,
    ProxyState,
    RedisPool,
)
from activity.errors import StoreUnavailable
from activity.types import Outcome, OutcomeReport
from tests.activity.redis_pools import MIN, pool_at, proxies_at, stock

pytestmark = pytest.mark.redis


def _beside(url: str, clock: ManualClock) -> RedisPool:
    """A pool of its own prefix on the same clock: where the write is applied once."""
    options = PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}")
    return RedisPool(redis.Redis.from_url(url, socket_timeout=5), options, clock=clock)


def _state(pool: RedisPool, *proxy_ids: str) -> tuple[object, ...]:
    """What a repeated write could have changed: counts, slots, and each proxy whole."""
    details = []
    for pid in proxy_ids:
        detail = pool.proxy_detail(pid)
        assert detail is not None
        details.append(detail)
    return pool.inventory("u1"), pool.upstream_inventory("u1"), tuple(details)


def test_a_health_update_sent_again_after_an_unknown_outcome_is_applied_as_once(relay, redis_url):
    """Idempotent by construction: the same update sets the same fields again, and an older
    check never overwrites a newer one (``stale``)."""
    twice, clock = pool_at(relay.url)
    once = _beside(redis_url, clock)
    now = clock.now()
    ids = stock(twice, now, 3)
    stock(once, now, 3)
    updates = [
        HealthUpdate("p0", ProxyState.UNHEALTHY, now + MIN, failure_reason="timeout"),
        HealthUpdate("p1", ProxyState.AVAILABLE, now + MIN, latency_ms=40),
    ]
    relay.cut_next_reply()
    with pytest.raises(StoreUnavailable):  # it ran; its caller cannot know
        twice.apply_health(updates)
    assert twice.apply_health(updates).applied == 2  # sent again: the same fields again
    once.apply_health(updates)
    assert _state(twice, *ids) == _state(once, *ids)


def test_an_upsert_sent_again_refreshes_and_counts_nothing_twice(relay, redis_url):
    """Without the caller's operation ID a repeated batch is a refresh of the same proxies
    (by construction); with it, the stored result answers and nothing runs again."""
    twice, clock = pool_at(relay.url)
    once = _beside(redis_url, clock)
    now = clock.now()
    batch = FetchedBatch("u1", proxies_at(now, 5), 100, timedelta(seconds=5), now)
    ids = [p.proxy_id for p in batch.proxies]
    assert twice.inventory("u1") == 0  # connected, its functions loaded: the cuts hit the upsert
    relay.cut_replies(after=0, count=2)  # the call and its own retry: the outcome unknown
    with pytest.raises(StoreUnavailable):
        twice.upsert_fetched(batch)
    again = twice.upsert_fetched(batch)
    assert (again.inserted, again.refreshed) == (0, 5)
    once.upsert_fetched(batch)
    assert _state(twice, *ids) == _state(once, *ids)

    keyed = FetchedBatch(
        "u1", proxies_at(now, 5, prefix="q"), 100, timedelta(seconds=5), now, operation_id="f-1"
    )
    relay.cut_replies(after=0, count=2)
    with pytest.raises(StoreUnavailable):
        twice.upsert_fetched(keyed)
    replayed = twice.upsert_fetched(keyed)
    assert (replayed.inserted, replayed.replayed) == (5, True)
    assert twice.inventory("u1") == 10


def test_an_outcome_sent_again_is_a_replay_and_counts_one_failure(relay):
    """One outcome per proxy: the same report again changes nothing (a failure counted once
    toward SUSPECT)."""
    pool, clock = pool_at(relay.url, options={"suspect_after_failures": 2})
    now = clock.now()
    stock(pool, now, 2)
    taken = [p.proxy_id for p in pool.extract(ExtractRequest("c1", 1)).proxies]
    report = OutcomeReport("c1", taken[0], Outcome.TIMEOUT, now)
    relay.cut_next_reply()
    with pytest.raises(StoreUnavailable):
        pool.report_outcome(report)
    result = pool.report_outcome(report)
    assert result.replayed and result.suspect_until is None  # one failure, not two
