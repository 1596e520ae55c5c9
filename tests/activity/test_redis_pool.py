"""RedisPool beyond the contract: faults on a Redis the test controls, processes, key TTLs,
secrets (lost replies: test_redis_lost_replies.py). The contract suite (test_contract.py)
already runs every port on RedisPool."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
import redis.backoff
import redis.retry

from activity import (
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
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
    LayoutMismatch,
    OwnershipConflict,
    StoreUnavailable,
)
from tests.activity.redis_pools import MIN, pool_at, proxies_at, stock

pytestmark = pytest.mark.redis


def test_a_script_cache_flush_between_calls_is_invisible(redis_url):
    """故障语义: SCRIPT FLUSH (failover, restart of the cache) reloads transparently."""
    pool, clock = pool_at(redis_url)
    stock(pool, clock.now(), 3)
    redis.Redis.from_url(redis_url).script_flush()
    assert pool.extract(ExtractRequest("c1", 2)).returned == 2
    redis.Redis.from_url(redis_url).script_flush()
    assert pool.inventory("u1") == 1


def test_a_lost_function_library_is_reloaded_transparently(private_redis):
    """故障语义: after FUNCTION FLUSH (or a restart, or a failover to a replica without the
    library) the next call reloads the pool's functions and runs, once."""
    server = private_redis()
    pool, clock = pool_at(server.url)
    stock(pool, clock.now(), 3)
    client = redis.Redis.from_url(server.url)
    client.function_flush()
    assert pool.extract(ExtractRequest("c1", 2)).returned == 2
    assert any(lib[1].startswith(b"pp_activity_") for lib in client.function_list())
    client.function_flush()
    assert pool.inventory("u1") == 1


def test_a_server_that_does_not_answer_in_time_is_store_unavailable(private_redis):
    """故障语义: every call is bounded in time; a frozen server is StoreUnavailable."""
    server = private_redis()
    pool, clock = pool_at(server.url, timeout=0.3)
    stock(pool, clock.now(), 2)
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
    pool, clock = pool_at(server.url, timeout=1)
    before = set(stock(pool, clock.now(), 6000))
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
    stock(pool, clock.now(), 2, prefix="new")
    assert {p.proxy_id for p in pool.extract(ExtractRequest("c", 10)).proxies} <= {"new0", "new1"}
    assert not before & {"new0", "new1"}


def test_a_layout_from_another_version_is_refused(redis_url):
    """CONVENTIONS: the data layout is versioned; a mismatch is refused, never misread."""
    pool, clock = pool_at(redis_url)
    stock(pool, clock.now(), 1)
    client = redis.Redis.from_url(redis_url)
    client.hset(f"{pool.options.prefix}:{{activity}}:meta", "layout", "99")
    with pytest.raises(LayoutMismatch):
        pool.inventory("u1")


def test_every_key_lives_until_the_latest_hard_expiry(redis_url):
    """短 TTL 清理: the main keys' TTL reaches the latest hard expiry: idle namespaces free
    themselves."""
    pool, clock = pool_at(redis_url)
    now = clock.now()
    stock(pool, now, 3, ttl=2 * MIN)
    stock(pool, now, 2, prefix="late", ttl=10 * MIN)
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
    pool, clock = pool_at(redis_url)
    now = clock.now()
    client = redis.Redis.from_url(redis_url)
    ns = f"{pool.options.prefix}:{{activity}}:"
    pool.open_session("w1", "s1", timedelta(minutes=30))
    stock(pool, now, 1, prefix="a", ttl=4 * MIN)
    pool.assign(now, "a0", "w1", 2 * MIN)
    shorten = proxies_at(now, 1, prefix="a", ttl=1 * MIN)
    pool.upsert_fetched(FetchedBatch("u1", shorten, 100, timedelta(seconds=5), now))
    longer = proxies_at(now, 1, prefix="a", ttl=3 * MIN)
    pool.upsert_fetched(FetchedBatch("u1", longer, 100, timedelta(seconds=5), now))
    stock(pool, now, 1, prefix="b", ttl=10 * timedelta(seconds=1))
    floor_ms = (3 * MIN).total_seconds() * 1000
    for name in ("inventory", "managed", "hot", "records", "owners", "owner-expiry", "epoch"):
        assert client.pttl(ns + name) >= floor_ms, name
    worker_owned = [k for k in client.scan_iter(match=ns + "worker-owned:*")]
    assert worker_owned and all(client.pttl(k) >= floor_ms for k in worker_owned)
    # Counters that sessions hold values of outlive the sessions, whatever the proxies do.
    session_floor = (25 * MIN).total_seconds() * 1000
    assert client.pttl(ns + "session-generation") >= session_floor
    assert client.pttl(ns + "epoch") >= session_floor
    # So does the worker's holdings revision: restarted under a live session, it could repeat
    # a revision the control plane has answered for other holdings.
    [revision] = list(client.scan_iter(match=ns + "worker-rev:*"))
    assert client.pttl(revision) >= session_floor


def test_a_revision_a_cleaning_counts_afresh_gets_a_lifetime(redis_url):
    """Key lifetimes: a sweep extends no key; when it ends an assignment whose worker's
    revision key had already expired (no session, nothing else held), the counter it creates
    still expires, never lives forever."""
    pool, clock = pool_at(redis_url)
    now = clock.now()
    stock(pool, now, 1, ttl=2 * MIN)
    pool.assign(now, "p0", "w1", MIN)
    client = redis.Redis.from_url(redis_url)
    [revision] = list(client.scan_iter(match=f"{pool.options.prefix}:{{activity}}:worker-rev:*"))
    client.delete(revision)  # as if it had expired
    clock.advance(3 * MIN)
    assert pool.sweep(10).expired == 1
    assert client.get(revision) == b"1"
    assert 0 < client.pttl(revision) <= 60_000
    client.close()
    pool.close()


def test_an_exits_failure_count_and_suspicion_outlive_the_pools_horizon(redis_url):
    """Key lifetimes: passive health's entries (in the quarantine hash and its expiry index)
    keep those keys alive to their ends, as a quarantine does, also past every record and
    past a shorter ban of the same call's keys."""
    pool, clock = pool_at(redis_url)
    now = clock.now()
    stock(pool, now, 1, ttl=2 * MIN)
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
    pool, clock = pool_at(redis_url)
    now = clock.now()
    stock(pool, now, 2, ttl=2 * MIN)
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


def test_a_replica_that_cannot_load_the_library_is_store_unavailable(private_redis):
    """故障语义: failover to a read-only replica without the library: typed, not a raw error."""
    server = private_redis()
    pool, clock = pool_at(server.url)
    stock(pool, clock.now(), 1)
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
    pool, clock = pool_at(redis_url, credentials=credentials)
    now = clock.now()
    proxies = proxies_at(now, 20, secret_ref=secret.ref)
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
    pool, clock = pool_at(redis_url)
    stock(pool, clock.now(), 1)
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
    pool, clock = pool_at(redis_url)
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
            stocked = set(stock(pool, clock.now(), PER_ROUND, prefix=f"r{round_}-"))
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
    pool, clock = pool_at(redis_url)
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
            stocked = stock(pool, clock.now(), RACE_PROXIES, prefix=f"r{round_}-p")
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
