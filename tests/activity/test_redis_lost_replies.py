"""RedisPool when a reply is lost on the wire (ADR-005 故障语义), through a relay that cuts it:
replay-safe calls are retried once and answered from what the first attempt stored; others
are StoreUnavailable, never retried behind the caller's back."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
import redis.backoff
import redis.retry

from activity import (
    CallQuota,
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    HealthUpdate,
    ManualClock,
    PoolOptions,
    ProxyState,
    RedisPool,
)
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    QuotaExceeded,
    StoreUnavailable,
)
from activity.types import ExpiredTally
from tests.activity.redis_pools import MIN, pool_at, proxies_at, stock

pytestmark = pytest.mark.redis


def test_a_reply_lost_after_commit_is_answered_by_the_retry(relay):
    """故障语义: the connection dies after the script committed; the retry replays, once."""
    pool, clock = pool_at(relay.url)
    now = clock.now()
    relay.cut_next_reply()
    first = pool.upsert_fetched(FetchedBatch("u1", proxies_at(now, 5), 100, MIN / 12, now))
    assert relay.cuts == 1
    assert (first.inserted, first.replayed) == (5, False)  # the retry saw the stored chunk
    assert pool.inventory("u1") == 5
    pool.apply_health([HealthUpdate(f"p{i}", ProxyState.AVAILABLE, now) for i in range(5)])
    relay.cut_next_reply()
    got = pool.extract(ExtractRequest("c1", 2, request_id="req-1"))
    assert relay.cuts == 2
    assert got.returned == 2 and not got.replayed  # our own retry is the first answer
    assert pool.inventory("u1") == 3  # taken once, not twice
    relay.cut_next_reply()
    with pytest.raises(StoreUnavailable):  # no key, no request ID: not retried blindly
        pool.extract(ExtractRequest("c1", 1))


def test_a_sweep_whose_reply_was_lost_tells_its_tally_through_the_retry(relay):
    """The expiry tally is taken by the sweep that ran: its retry after a lost reply answers
    with that sweep's result (tally included) and sweeps nothing twice."""
    pool, clock = pool_at(relay.url)
    now = clock.now()
    pool.upsert_fetched(FetchedBatch("u1", proxies_at(now, 3, ttl=MIN), 100, MIN / 12, now))
    clock.advance(2 * MIN)
    relay.cut_next_reply()
    result = pool.sweep(100)
    assert relay.cuts == 1
    assert (result.expired, result.tally) == (3, {"u1": ExpiredTally(used=0, unused=3)})
    assert pool.sweep(100).tally == {}
    pool.close()


@pytest.fixture
def relayed_pool(relay):
    """A pool behind the relay, its connections closed at the end."""
    pool, clock = pool_at(relay.url)
    yield pool, clock
    pool.close()


def test_an_extract_retried_after_a_lost_reply_is_charged_once(relay, relayed_pool):
    """The retry of an extract whose reply was lost takes no second call unit and no second
    proxies: the quota is charged by the call that committed (extract.lua, step 0)."""
    pool, clock = relayed_pool
    stock(pool, clock.now(), 4)
    quota = CallQuota(calls=2, proxies=3)
    relay.cut_next_reply()
    got = pool.extract(ExtractRequest("c1", 2, request_id="req-q", quota=quota))
    assert relay.cuts == 1 and got.returned == 2 and not got.replayed
    assert pool.extract(ExtractRequest("c1", 1, request_id="req-r", quota=quota)).returned == 1
    with pytest.raises(QuotaExceeded) as refused:  # 2 calls and 3 proxies: both used up once
        pool.extract(ExtractRequest("c1", 1, request_id="req-s", quota=quota))
    assert refused.value.reason == "calls"


@pytest.mark.parametrize("first_answer", ["replay", "conflict", "shortfall", "over proxies"])
def test_a_retried_call_that_stored_no_result_is_charged_once(relay, relayed_pool, first_answer):
    """An extract whose first attempt committed a call unit but stored no result under its
    nonce (a replay, a conflict, a refusal): its retry after the lost reply takes no second."""
    pool, clock = relayed_pool
    stock(pool, clock.now(), 2)
    quota = CallQuota(calls=3, proxies=3)
    pool.extract(ExtractRequest("c1", 1, idempotency_key="k", quota=quota))  # call 1
    aon = ExtractMode.ALL_OR_NOTHING
    request, answer = {
        "replay": (ExtractRequest("c1", 1, idempotency_key="k", quota=quota), None),
        "conflict": (
            ExtractRequest("c1", 2, idempotency_key="k", quota=quota),
            IdempotencyConflict,
        ),
        "shortfall": (
            ExtractRequest("c1", 2, aon, quota=quota, request_id="s"),
            InsufficientInventory,
        ),
        "over proxies": (ExtractRequest("c1", 3, quota=quota, request_id="o"), QuotaExceeded),
    }[first_answer]
    relay.cut_next_reply()
    if answer is None:
        assert pool.extract(request).replayed  # call 2, its reply lost, then retried
    else:
        with pytest.raises(answer):
            pool.extract(request)
    assert relay.cuts == 1
    pool.charge_call("c1", quota)  # call 3: still fits, so call 2 was counted once
    with pytest.raises(QuotaExceeded) as refused:
        pool.charge_call("c1", quota)
    assert refused.value.reason == "calls"


def test_a_retried_upsert_keeps_chunks_by_input_position(relay):
    """Upsert: a call that failed after its first chunk, retried once the clock dropped an
    early candidate, still writes every survivor: chunks follow input positions."""
    pool, clock = pool_at(relay.url, options={"script_batch_cap": 2})
    now = clock.now()
    pool.inventory("u1")  # the function library is loaded before replies are counted
    batch = proxies_at(now, 1, prefix="a", ttl=10 * timedelta(seconds=1)) + proxies_at(
        now, 3, prefix="b"
    )
    relay.cut_requests(after=1, count=2)  # chunk 1 runs; chunk 2 and its retry never arrive
    with pytest.raises(StoreUnavailable):
        pool.upsert_fetched(FetchedBatch("u1", batch, 100, timedelta(seconds=5), now, "op-1"))
    clock.advance(6 * timedelta(seconds=1))  # "a0" is inside its safety margin now
    again = FetchedBatch("u1", batch, 100, timedelta(seconds=5), clock.now(), "op-1")
    pool.upsert_fetched(again)
    assert pool.inventory("u1") == 4  # a0 and b0 (the first call's chunk), b1 and b2


@pytest.mark.parametrize("cap", [5, 2])
def test_an_upsert_whose_last_reply_was_lost_still_names_its_new_proxies(relay, cap):
    """The retry of the last chunk finds the whole call's result stored, which keeps no new
    IDs: it answers from the chunk's own, so the intake check still probes every new proxy
    (one chunk, and three)."""
    pool, clock = pool_at(relay.url, options={"script_batch_cap": cap})
    now = clock.now()
    pool.inventory("u1")  # the function library is loaded before replies are counted
    chunks = -(-5 // cap)
    relay.cut_replies(after=chunks - 1, count=1)  # the last chunk's reply
    result = pool.upsert_fetched(FetchedBatch("u1", proxies_at(now, 5), 100, MIN / 12, now))
    assert relay.cuts == 1 and (result.inserted, result.replayed) == (5, False)
    assert result.inserted_ids == tuple(f"p{i}" for i in range(5))
    pool.close()


def test_redis_py_never_retries_behind_our_back(relay):
    """故障语义: a lost reply to an assign is StoreUnavailable (outcome unknown), and the
    assign ran once, even with a client configured to retry on its own."""
    clock = ManualClock(datetime.now(UTC))
    eager = redis.Redis(
        host="127.0.0.1",
        port=relay.port,
        socket_timeout=5,
        retry=redis.retry.Retry(redis.backoff.NoBackoff(), 10),
        retry_on_error=[redis.ConnectionError],
    )
    pool = RedisPool(eager, PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}"), clock=clock)
    stock(pool, clock.now(), 2)
    relay.cut_next_reply()
    with pytest.raises(StoreUnavailable):
        pool.assign(clock.now(), "p0", "w1", MIN)
    assert pool.get("p0").epoch == 1  # it ran, once: no second epoch, no "already_owned"
    assert pool.assign(clock.now(), "p1", "w1", MIN).epoch == 2
