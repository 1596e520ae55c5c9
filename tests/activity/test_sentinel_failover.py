"""The activity pool on a Redis that Sentinel fails over (ADR-005 "部署边界"): a primary, a
replica and three Sentinels on loopback ports, owned by the test. The pool's client reaches the
master through a ``redis+sentinel://`` URL (activity/redis_url.py); the primary is killed; the
pool follows the new master within a bound, with its data, its generation and every hand-out
it made (the replica was in sync: what an asynchronous failover can lose is the writes a
replica had not received, docs/OPERATIONS.md)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

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
from activity.errors import StoreUnavailable
from activity.redis_url import connect
from tests.harness.sentinel import SentinelDeployment

pytestmark = [pytest.mark.fault, pytest.mark.slow]

MIN = timedelta(minutes=1)
#: From the primary's death to the pool's first answer from the new master: Sentinel's
#: down-after (0.5 s), its election and promotion (about a second here), then the pool's next
#: connection asking the Sentinels again.
FOLLOW_WITHIN_S = 10.0


@pytest.fixture
def deployment(tmp_path):
    with SentinelDeployment(tmp_path) as running:
        yield running


def test_the_pool_follows_a_failover_with_its_data_and_hands_nothing_out_twice(deployment):
    clock = ManualClock(datetime.now(UTC))
    client = connect(deployment.url, socket_timeout=2, socket_connect_timeout=1)
    pool = RedisPool(client, PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}"), clock=clock)
    now = clock.now()
    proxies = [
        FetchedProxy(f"p{i}", f"exit-{i}", f"10.4.0.{i}", 8080, "http", now + 10 * MIN)
        for i in range(20)
    ]
    pool.upsert_fetched(FetchedBatch("u1", proxies, 100, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])
    before = pool.extract(ExtractRequest("c1", 8))
    assert len(before.proxies) == 8
    old = deployment.master_port()
    deployment.synced()

    deployment.primary.kill()
    killed = time.monotonic()
    failures = 0
    while True:
        try:
            after = pool.extract(ExtractRequest("c2", 1))
            break
        except StoreUnavailable:
            failures += 1
            assert time.monotonic() - killed < FOLLOW_WITHIN_S, "the pool did not follow"
            time.sleep(0.1)
    followed = time.monotonic() - killed
    assert deployment.master_port() != old
    assert followed < FOLLOW_WITHIN_S, followed
    assert failures >= 1  # it was really cut off, and came back by itself

    rest = pool.extract(ExtractRequest("c3", 20))
    handed = [p.proxy_id for r in (before, after, rest) for p in r.proxies]
    assert len(handed) == len(set(handed)) == 20, handed  # each exactly once, across the failover
    assert after.generation == before.generation  # the data came over: the same generation
    pool.close()
