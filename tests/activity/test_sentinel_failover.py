"""The activity pool on a Redis that Sentinel fails over (ADR-005 "部署边界"): a primary, a
replica and three Sentinels on loopback ports, owned by the test. The pool's client reaches the
master through a ``redis+sentinel://`` URL (activity/redis_url.py); the primary is killed; the
pool follows the new master within a bound, with its data and every hand-out it made, under a
new generation (a failover always ends one: docs/DECISIONS.md). With the replica held back, the
failover loses the last extracts: their proxies are handed out again, but only under the new
generation (docs/OPERATIONS.md "Through Sentinel")."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from activity import (
    ExtractRequest,
    ExtractResult,
    PoolOptions,
    RedisPool,
)
from activity.contract.harness import ManualClock
from activity.errors import StoreUnavailable
from activity.redis_url import connect
from tests.harness.pool_stock import stock
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


def _stocked_pool(deployment: SentinelDeployment, n: int = 20) -> RedisPool:
    clock = ManualClock(datetime.now(UTC))
    client = connect(deployment.url, socket_timeout=2, socket_connect_timeout=1)
    pool = RedisPool(client, PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}"), clock=clock)
    stock(pool, clock, n, network="10.4.0")
    return pool


def _first_answer_after(pool: RedisPool, killed: float) -> ExtractResult:
    """The pool's first extract the new master answers, asked every 0.1 s."""
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
    assert followed < FOLLOW_WITHIN_S, followed
    assert failures >= 1  # it was really cut off, and came back by itself
    return after


def test_the_pool_follows_a_failover_with_its_data_and_hands_nothing_out_twice(deployment):
    pool = _stocked_pool(deployment)
    before = pool.extract(ExtractRequest("c1", 8))
    assert len(before.proxies) == 8
    old = deployment.master_port()
    deployment.synced()

    deployment.primary.kill()
    after = _first_answer_after(pool, time.monotonic())
    assert deployment.master_port() != old

    rest = pool.extract(ExtractRequest("c3", 20))
    handed = [p.proxy_id for r in (before, after, rest) for p in r.proxies]
    assert len(handed) == len(set(handed)) == 20, handed  # each exactly once, across the failover
    # The data came over, but the pool cannot know that it all did: a new generation.
    assert after.generation != before.generation
    assert rest.generation == after.generation
    pool.close()


def test_extracts_the_failover_lost_are_handed_out_again_only_in_a_new_generation(deployment):
    pool = _stocked_pool(deployment)
    kept = pool.extract(ExtractRequest("c1", 5))
    deployment.synced()
    with deployment.replication_held():
        lost = pool.extract(ExtractRequest("c1", 5, idempotency_key="k1"))  # acknowledged
        deployment.lose_primary()
        killed = time.monotonic()
    after = _first_answer_after(pool, killed)
    retry = pool.extract(ExtractRequest("c1", 5, idempotency_key="k1"))
    rest = pool.extract(ExtractRequest("c3", 20))
    assert not retry.replayed  # its replay record was lost with it
    assert after.generation != kept.generation == lost.generation
    assert {after.generation, retry.generation, rest.generation} == {after.generation}
    new = [p.proxy_id for r in (after, retry, rest) for p in r.proxies]
    assert len(new) == len(set(new)) == 15, new  # once each in the new generation
    lost_ids = {p.proxy_id for p in lost.proxies}
    assert lost_ids <= set(new)  # handed out again, but under another generation
    assert set(new).isdisjoint(p.proxy_id for p in kept.proxies)  # what came over stays out
    pool.close()


def test_extracts_under_load_hand_nothing_out_twice_in_one_generation(deployment):
    """Four clients extracting one proxy at a time, each call with its own idempotency key and
    sent again with it after a StoreUnavailable (as the API's clients are told to), while the
    primary is lost with the writes its replica never got."""
    pool = _stocked_pool(deployment, 200)
    deployment.synced()
    answers: list[ExtractResult] = []
    after_failover = threading.Event()
    stop = threading.Event()

    def client(name: str) -> None:
        for n in range(1_000):  # bounded: far more calls than the test lasts
            if stop.is_set():
                return
            request = ExtractRequest(name, 1, idempotency_key=f"{name}-{n}")
            deadline = time.monotonic() + FOLLOW_WITHIN_S
            while not stop.is_set():
                try:
                    answers.append(pool.extract(request))
                    break
                except StoreUnavailable:
                    assert time.monotonic() < deadline, "no answer within the bound"
                    time.sleep(0.05)
            if after_failover.is_set():
                time.sleep(0.01)

    threads = [threading.Thread(target=client, args=(f"c{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(answers) >= 20)
        first = answers[0].generation
        with deployment.replication_held():
            seen = len(answers)
            wait_for(lambda: len(answers) >= seen + 20)  # these are lost
            deployment.lose_primary()
        after_failover.set()
        wait_for(lambda: sum(a.generation != first for a in answers) >= 20, FOLLOW_WITHIN_S)
    finally:
        stop.set()
        for t in threads:
            t.join(FOLLOW_WITHIN_S)
    generations = {a.generation for a in answers}
    assert len(generations) == 2, generations  # the first, and the one the failover started
    by_generation = {}
    for generation in generations:
        handed = [p.proxy_id for a in answers if a.generation == generation for p in a.proxies]
        assert len(handed) == len(set(handed)), generation  # never twice in one generation
        by_generation[generation] = set(handed)
    # Writes were lost: proxies handed out before are handed out again, in the new generation.
    old, new = by_generation.pop(first), by_generation.popitem()[1]
    assert old & new
    pool.close()


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.01)
