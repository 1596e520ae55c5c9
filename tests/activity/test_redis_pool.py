"""RedisPool beyond the contract: faults on a Redis the test controls, processes, key TTLs,
secrets. The contract suite (test_contract.py) already runs every port on RedisPool."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
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
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    Outcome,
    OutcomeReport,
    PoolOptions,
    ProxyState,
    RedisPool,
    StaticCredentials,
)
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    LayoutMismatch,
    OwnershipConflict,
    QuotaExceeded,
    StoreUnavailable,
)
from activity.types import ExpiredTally
from tests.harness.netfault import CuttingRelay

MIN = timedelta(minutes=1)
pytestmark = pytest.mark.redis


def _proxies(now: datetime, n: int, prefix: str = "p", ttl: timedelta = 10 * MIN, **kw):
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


def _stock(pool: RedisPool, now: datetime, n: int, prefix: str = "p", **kw) -> list[str]:
    proxies = _proxies(now, n, prefix, **kw)
    pool.upsert_fetched(FetchedBatch("u1", proxies, 10**6, timedelta(seconds=5), now))
    updates = [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies]
    for start in range(0, len(updates), 1000):
        pool.apply_health(updates[start : start + 1000])
    return [p.proxy_id for p in proxies]


def _pool(url: str, **kw) -> tuple[RedisPool, ManualClock]:
    clock = ManualClock(datetime.now(UTC))
    client = redis.Redis.from_url(url, socket_timeout=kw.pop("timeout", 5))
    options = PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}", **kw.pop("options", {}))
    return RedisPool(client, options, clock=clock, **kw), clock


@pytest.fixture
def relay(redis_url):
    """A CuttingRelay in front of the run's Redis, closed at the end."""
    port = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs["port"]
    relay = CuttingRelay(port)
    yield relay
    relay.close()


def test_a_reply_lost_after_commit_is_answered_by_the_retry(relay):
    """故障语义: the connection dies after the script committed; the retry replays, once."""
    pool, clock = _pool(relay.url)
    now = clock.now()
    relay.cut_next_reply()
    first = pool.upsert_fetched(FetchedBatch("u1", _proxies(now, 5), 100, MIN / 12, now))
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
    pool, clock = _pool(relay.url)
    now = clock.now()
    pool.upsert_fetched(FetchedBatch("u1", _proxies(now, 3, ttl=MIN), 100, MIN / 12, now))
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
    pool, clock = _pool(relay.url)
    yield pool, clock
    pool.close()


def test_an_extract_retried_after_a_lost_reply_is_charged_once(relay, relayed_pool):
    """The retry of an extract whose reply was lost takes no second call unit and no second
    proxies: the quota is charged by the call that committed (extract.lua, step 0)."""
    pool, clock = relayed_pool
    _stock(pool, clock.now(), 4)
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
    _stock(pool, clock.now(), 2)
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
    pool, clock = _pool(relay.url, options={"script_batch_cap": 2})
    now = clock.now()
    pool.inventory("u1")  # the function library is loaded before replies are counted
    batch = _proxies(now, 1, prefix="a", ttl=10 * timedelta(seconds=1)) + _proxies(
        now, 3, prefix="b"
    )
    relay.cut_requests(after=1, count=2)  # chunk 1 runs; chunk 2 and its retry never arrive
    with pytest.raises(StoreUnavailable):
        pool.upsert_fetched(FetchedBatch("u1", batch, 100, timedelta(seconds=5), now, "op-1"))
    clock.advance(6 * timedelta(seconds=1))  # "a0" is inside its safety margin now
    again = FetchedBatch("u1", batch, 100, timedelta(seconds=5), clock.now(), "op-1")
    pool.upsert_fetched(again)
    assert pool.inventory("u1") == 4  # a0 and b0 (the first call's chunk), b1 and b2


def test_a_script_cache_flush_between_calls_is_invisible(redis_url):
    """故障语义: SCRIPT FLUSH (failover, restart of the cache) reloads transparently."""
    pool, clock = _pool(redis_url)
    _stock(pool, clock.now(), 3)
    redis.Redis.from_url(redis_url).script_flush()
    assert pool.extract(ExtractRequest("c1", 2)).returned == 2
    redis.Redis.from_url(redis_url).script_flush()
    assert pool.inventory("u1") == 1


def test_a_lost_function_library_is_reloaded_transparently(private_redis):
    """故障语义: after FUNCTION FLUSH (or a restart, or a failover to a replica without the
    library) the next call reloads the pool's functions and runs, once."""
    server = private_redis()
    pool, clock = _pool(server.url)
    _stock(pool, clock.now(), 3)
    client = redis.Redis.from_url(server.url)
    client.function_flush()
    assert pool.extract(ExtractRequest("c1", 2)).returned == 2
    assert any(lib[1].startswith(b"pp_activity_") for lib in client.function_list())
    client.function_flush()
    assert pool.inventory("u1") == 1


def test_a_server_that_does_not_answer_in_time_is_store_unavailable(private_redis):
    """故障语义: every call is bounded in time; a frozen server is StoreUnavailable."""
    server = private_redis()
    pool, clock = _pool(server.url, timeout=0.3)
    _stock(pool, clock.now(), 2)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            pool.inventory("u1")
        assert time.monotonic() - started < 2
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert pool.inventory("u1") == 2


def test_a_server_lost_under_load_fails_closed_and_restarts_a_new_generation(private_redis):
    """故障语义: Redis down -> StoreUnavailable, never a partial all-or-nothing; a restarted
    (empty) Redis is a new pool generation with nothing from before."""
    server = private_redis()
    pool, clock = _pool(server.url, timeout=1)
    before = set(_stock(pool, clock.now(), 6000))
    outcomes: list[object] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                res = pool.extract(ExtractRequest("c", 3, ExtractMode.ALL_OR_NOTHING))
                outcomes.append(res.returned)
            except Exception as exc:
                outcomes.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    server.kill()
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert errors, "the load never saw the server go"
    assert all(isinstance(e, StoreUnavailable) for e in errors), {repr(e) for e in errors}
    assert all(o == 3 for o in outcomes if not isinstance(o, Exception))  # never partial
    assert len(outcomes) - len(errors) < 2000, "the load ran out of stock before the loss"
    server.start()
    assert pool.inventory("u1") == 0
    assert pool.extract(ExtractRequest("c", 10)).returned == 0
    _stock(pool, clock.now(), 2, prefix="new")
    assert {p.proxy_id for p in pool.extract(ExtractRequest("c", 10)).proxies} <= {"new0", "new1"}
    assert not before & {"new0", "new1"}


def test_a_layout_from_another_version_is_refused(redis_url):
    """CONVENTIONS: the data layout is versioned; a mismatch is refused, never misread."""
    pool, clock = _pool(redis_url)
    _stock(pool, clock.now(), 1)
    client = redis.Redis.from_url(redis_url)
    client.hset(f"{pool.options.prefix}:{{activity}}:meta", "layout", "99")
    with pytest.raises(LayoutMismatch):
        pool.inventory("u1")


def test_every_key_lives_until_the_latest_hard_expiry(redis_url):
    """短 TTL 清理: the main keys' TTL reaches the latest hard expiry: idle namespaces free
    themselves."""
    pool, clock = _pool(redis_url)
    now = clock.now()
    _stock(pool, now, 3, ttl=2 * MIN)
    _stock(pool, now, 2, prefix="late", ttl=10 * MIN)
    pool.extract(ExtractRequest("c", 1, idempotency_key="k"))
    pool.assign(now, "late0", "w1", MIN)
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{pool.options.prefix}:*", count=1000))
    assert len(keys) > 10
    for key in keys:
        ttl_ms = client.pttl(key)
        assert ttl_ms > 0, key
        if b":idem:" not in key and b":op:" not in key:  # replays: their own TTLs
            assert ttl_ms >= (10 * MIN - timedelta(seconds=5)).total_seconds() * 1000, key
        assert ttl_ms <= (10 * MIN + 2 * MIN).total_seconds() * 1000, key


def test_key_lifetimes_only_grow(redis_url):
    """短 TTL 清理: a provider shortening one proxy's TTL never shortens a key other live data
    needs; counters, worker sets and the epoch/generation counters keep up."""
    pool, clock = _pool(redis_url)
    now = clock.now()
    client = redis.Redis.from_url(redis_url)
    ns = f"{pool.options.prefix}:{{activity}}:"
    pool.open_session("w1", "s1", timedelta(minutes=30))
    _stock(pool, now, 1, prefix="a", ttl=4 * MIN)
    pool.assign(now, "a0", "w1", 2 * MIN)
    shorten = _proxies(now, 1, prefix="a", ttl=1 * MIN)
    pool.upsert_fetched(FetchedBatch("u1", shorten, 100, timedelta(seconds=5), now))
    longer = _proxies(now, 1, prefix="a", ttl=3 * MIN)
    pool.upsert_fetched(FetchedBatch("u1", longer, 100, timedelta(seconds=5), now))
    _stock(pool, now, 1, prefix="b", ttl=10 * timedelta(seconds=1))
    floor_ms = (3 * MIN).total_seconds() * 1000
    for name in ("inventory", "managed", "hot", "records", "owners", "owner-expiry", "epoch"):
        assert client.pttl(ns + name) >= floor_ms, name
    worker_owned = [k for k in client.scan_iter(match=ns + "worker-owned:*")]
    assert worker_owned and all(client.pttl(k) >= floor_ms for k in worker_owned)
    # Counters that sessions hold values of outlive the sessions, whatever the proxies do.
    session_floor = (25 * MIN).total_seconds() * 1000
    assert client.pttl(ns + "session-generation") >= session_floor
    assert client.pttl(ns + "epoch") >= session_floor


def test_an_exits_failure_count_and_suspicion_outlive_the_pools_horizon(redis_url):
    """Key lifetimes: passive health's entries (in the quarantine hash and its expiry index)
    keep those keys alive to their ends, as a quarantine does, also past every record and
    past a shorter ban of the same call's keys."""
    pool, clock = _pool(redis_url)
    now = clock.now()
    _stock(pool, now, 1, ttl=2 * MIN)
    [taken] = pool.extract(ExtractRequest("c1", 1)).proxies
    pool.report_outcome(OutcomeReport("c1", taken.proxy_id, Outcome.TIMEOUT, now))
    client = redis.Redis.from_url(redis_url)
    ns = f"{pool.options.prefix}:{{activity}}:"
    window_ms = pool.options.failure_window.total_seconds() * 1000
    for name in ("quarantine", "quarantine-expiry"):
        assert client.pttl(ns + name) >= window_ms - 60_000, name
    assert client.hlen(ns + "quarantine") == 1  # the count; no banned host
    client.close()
    pool.close()


def test_a_quarantine_outlives_the_pools_horizon_and_an_outcome_its_record(redis_url):
    """Key lifetimes: quarantine keys live to the quarantine's end even when every record
    expires sooner; the outcome goes with its record."""
    pool, clock = _pool(redis_url)
    now = clock.now()
    _stock(pool, now, 2, ttl=2 * MIN)
    taken = pool.extract(ExtractRequest("c1", 2)).proxies
    ban = OutcomeReport("c1", taken[0].proxy_id, Outcome.BANNED, now, quarantine=60 * MIN)
    pool.report_outcome(ban)
    pool.report_outcome(OutcomeReport("c1", taken[1].proxy_id, Outcome.OK, now))
    client = redis.Redis.from_url(redis_url)
    ns = f"{pool.options.prefix}:{{activity}}:"
    for name in ("quarantine", "quarantine-expiry", "quarantine-exits"):
        assert client.pttl(ns + name) >= (59 * MIN).total_seconds() * 1000, name
    assert 0 < client.pttl(ns + "outcomes") <= (3 * MIN).total_seconds() * 1000
    assert client.hlen(ns + "outcomes") == 2
    clock.advance(3 * MIN)
    assert pool.sweep(10).expired == 2
    assert client.hlen(ns + "outcomes") == 0
    assert client.hlen(ns + "quarantine") == 1


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
    _stock(pool, clock.now(), 2)
    relay.cut_next_reply()
    with pytest.raises(StoreUnavailable):
        pool.assign(clock.now(), "p0", "w1", MIN)
    assert pool.get("p0").epoch == 1  # it ran, once: no second epoch, no "already_owned"
    assert pool.assign(clock.now(), "p1", "w1", MIN).epoch == 2


def test_a_replica_that_cannot_load_the_library_is_store_unavailable(private_redis):
    """故障语义: failover to a read-only replica without the library: typed, not a raw error."""
    server = private_redis()
    pool, clock = _pool(server.url)
    _stock(pool, clock.now(), 1)
    client = redis.Redis.from_url(server.url)
    client.function_flush()
    client.replicaof("127.0.0.1", 1)  # nobody there: it stays a read-only replica
    try:
        with pytest.raises(StoreUnavailable):
            pool.inventory("u1")
    finally:
        client.replicaof("no", "one")


def test_no_secret_in_keys_logs_or_errors(redis_url, caplog):
    """Invariant 3: no password or raw SecretRef in a key name, log record or error message."""
    caplog.set_level(logging.DEBUG)
    credentials = StaticCredentials()
    secret = credentials.put("proxy-user", "S3cr3t-pa55word")
    pool, clock = _pool(redis_url, credentials=credentials)
    now = clock.now()
    proxies = _proxies(now, 20, secret_ref=secret.ref)
    pool.upsert_fetched(FetchedBatch("u1", proxies, 100, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])
    got = pool.extract(ExtractRequest("c1", 5, idempotency_key="key-1"))
    assert got.proxies[0].password == "S3cr3t-pa55word"
    messages = []
    for call in (
        lambda: pool.extract(ExtractRequest("c1", 6, idempotency_key="key-1")),
        lambda: pool.extract(ExtractRequest("c1", 100, ExtractMode.ALL_OR_NOTHING)),
        lambda: pool.assign(now, got.proxies[0].proxy_id, "w1", MIN),
        lambda: pool.upsert_fetched(FetchedBatch("u1", proxies * 2, 100, MIN, now)),
    ):
        with pytest.raises(Exception) as err:
            call()
        messages += [str(err.value), repr(err.value)]
    client = redis.Redis.from_url(redis_url)
    keys = [k.decode() for k in client.scan_iter(match=f"{pool.options.prefix}:*", count=1000)]
    texts = keys + messages + [r.getMessage() for r in caplog.records] + [repr(got)]
    for text in texts:
        assert "S3cr3t" not in text
        assert secret.ref.ref not in text


def test_ownership_conflicts_are_typed_on_redis(redis_url):
    """Worker 所有权: the loser of a race gets a typed result."""
    pool, clock = _pool(redis_url)
    _stock(pool, clock.now(), 1)
    pool.assign(clock.now(), "p0", "w1", MIN)
    with pytest.raises(OwnershipConflict) as err:
        pool.assign(clock.now(), "p0", "w2", MIN)
    assert err.value.reason == "already_owned"


# ---------------------------------------------------------------- separate processes
ROUNDS, PROCESSES, PER_ROUND = 100, 16, 48


def _extractor(url: str, prefix: str, start: float, barrier, results) -> None:
    clock = ManualClock(datetime.fromtimestamp(start, UTC))
    pool = RedisPool(
        redis.Redis.from_url(url, socket_timeout=10), PoolOptions(prefix=prefix), clock=clock
    )
    for round_ in range(ROUNDS):
        barrier.wait()
        got = pool.extract(ExtractRequest(f"c{os.getpid()}", 4))
        results.put((round_, [p.proxy_id for p in got.proxies]))
        barrier.wait()


@pytest.mark.slow
def test_extractors_in_separate_processes_never_share_a_proxy(redis_url):
    """100 轮并发 Extract across 16 processes: disjoint sets; their union is what left."""
    pool, clock = _pool(redis_url)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES + 1)
    results = context.Queue()
    start = clock.now().timestamp()
    workers = [
        context.Process(
            target=_extractor, args=(redis_url, pool.options.prefix, start, barrier, results)
        )
        for _ in range(PROCESSES)
    ]
    for w in workers:
        w.start()
    try:
        for round_ in range(ROUNDS):
            stocked = set(_stock(pool, clock.now(), PER_ROUND, prefix=f"r{round_}-"))
            before = pool.inventory("u1")
            barrier.wait(timeout=60)  # go
            barrier.wait(timeout=60)  # done
            handed: list[str] = []
            for _ in range(PROCESSES):
                got_round, ids = results.get(timeout=30)
                assert got_round == round_
                handed += ids
            assert len(handed) == len(set(handed)) == PER_ROUND
            assert set(handed) == stocked
            assert before - pool.inventory("u1") == PER_ROUND
    finally:
        for w in workers:
            w.join(timeout=30)
            if w.is_alive():
                w.kill()
    assert all(w.exitcode == 0 for w in workers)


RACE_PROXIES = 4


def _contender(kind: str, index: int, url: str, prefix: str, start: float, barrier, results):
    clock = ManualClock(datetime.fromtimestamp(start, UTC))
    pool = RedisPool(
        redis.Redis.from_url(url, socket_timeout=10), PoolOptions(prefix=prefix), clock=clock
    )
    for round_ in range(ROUNDS):
        barrier.wait()
        won: list[str] = []
        if kind == "extract":
            won = [p.proxy_id for p in pool.extract(ExtractRequest(f"c{index}", 1)).proxies]
        else:
            for i in range(RACE_PROXIES):
                pid = f"r{round_}-p{(i + index) % RACE_PROXIES}"
                try:
                    pool.assign(clock.now(), pid, f"w{index}", MIN)
                    won.append(pid)
                except OwnershipConflict as exc:
                    assert exc.reason in {"already_owned", "not_available"}
        results.put((round_, kind, won))
        barrier.wait()


@pytest.mark.slow
def test_assign_and_extract_racing_from_processes_have_one_winner(redis_url):
    """Worker 所有权: assign and extract racing for the same proxies from separate processes:
    for every proxy exactly one wins; every loser gets a typed answer."""
    pool, clock = _pool(redis_url)
    context = multiprocessing.get_context("spawn")
    kinds = ["extract"] * 8 + ["assign"] * 8
    barrier = context.Barrier(len(kinds) + 1)
    results = context.Queue()
    start = clock.now().timestamp()
    workers = [
        context.Process(
            target=_contender,
            args=(kind, i, redis_url, pool.options.prefix, start, barrier, results),
        )
        for i, kind in enumerate(kinds)
    ]
    for w in workers:
        w.start()
    try:
        for round_ in range(ROUNDS):
            stocked = _stock(pool, clock.now(), RACE_PROXIES, prefix=f"r{round_}-p")
            barrier.wait(timeout=60)
            barrier.wait(timeout=60)
            wins: dict[str, int] = dict.fromkeys(stocked, 0)
            for _ in kinds:
                got_round, _kind, won = results.get(timeout=30)
                assert got_round == round_
                for pid in won:
                    wins[pid] += 1
            assert all(count == 1 for count in wins.values()), wins
            pool.expire(clock.now() + 2 * MIN, 100)  # hand the assigned ones back
            pool.extract(ExtractRequest("cleanup", RACE_PROXIES))
    finally:
        for w in workers:
            w.join(timeout=30)
            if w.is_alive():
                w.kill()
    assert all(w.exitcode == 0 for w in workers)
