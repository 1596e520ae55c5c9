"""A failover ends the pool generation (docs/activity-pool.md "Generation", docs/DECISIONS.md).

Two private servers, a primary and its replica, and the replica promoted by hand
(``REPLICAOF NO ONE``, what Sentinel sends it): a promoted replica has a new replication ID, and
the pool's next extract on it starts a new generation. Without Sentinel, a pool follows the
promotion the way a process started after a failover does: a new client on the new master
(tests/activity/test_sentinel_failover.py has a pool that follows by itself).
"""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

import pytest
import redis

from activity import (
    ExtractRequest,
    PoolOptions,
    RedisPool,
)
from activity.contract.harness import ManualClock
from activity.errors import StoreUnavailable
from pool_admin.localservices import RedisServer
from tests.harness.pool_stock import stock
from tests.harness.sentinel import lose_primary, replication_held

pytestmark = pytest.mark.fault

MIN = timedelta(minutes=1)
PROXIES = 10


class Pair:
    """A primary and a replica of it, and the pool's namespace on them."""

    def __init__(self, private_redis, tmp_path) -> None:
        self.primary: RedisServer = private_redis()
        with self.admin(self.primary) as client:  # a full sync at once, not after 5 s
            client.config_set("repl-diskless-sync-delay", 0)
        self.replica = RedisServer(
            tmp_path / "replica", args=("--replicaof", "127.0.0.1", str(self.primary.port))
        )
        self.replica.start()
        self.prefix = f"t{uuid.uuid4().hex[:12]}"
        self.clock = ManualClock(datetime.now(UTC))
        self.pools: list[RedisPool] = []
        try:
            with self.admin(self.replica) as client:
                deadline = time.monotonic() + 10
                while client.info("replication")["master_link_status"] != "up":
                    assert time.monotonic() < deadline, "the replica did not connect"
                    time.sleep(0.02)
        except BaseException:
            self.replica.kill()
            raise

    def pool(self, server: RedisServer) -> RedisPool:
        client = redis.Redis.from_url(server.url, socket_timeout=5)
        made = RedisPool(client, PoolOptions(prefix=self.prefix), clock=self.clock)
        self.pools.append(made)
        return made

    def admin(self, server: RedisServer) -> redis.Redis:
        return redis.Redis.from_url(server.url, socket_timeout=5, decode_responses=True)

    def meta(self, server: RedisServer) -> dict[str, str]:
        with self.admin(server) as client:
            found: dict[str, str] = client.hgetall(f"{self.prefix}:{{activity}}:meta")
            return found

    def synced(self) -> None:
        with self.admin(self.primary) as client:
            assert client.wait(1, 5000) == 1, "the replica did not catch up"

    def replication_held(self) -> AbstractContextManager[None]:
        return replication_held(self.replica.port)

    def lose_primary(self) -> None:
        lose_primary(self.primary, self.replica.port)

    def promote(self) -> None:
        with self.admin(self.replica) as client:
            client.replicaof("NO", "ONE")

    def stock(self, pool: RedisPool) -> None:
        stock(pool, self.clock, PROXIES)

    def close(self) -> None:
        for made in self.pools:
            made.close()
        self.replica.kill()


@pytest.fixture
def pair(private_redis, tmp_path):
    made = Pair(private_redis, tmp_path)
    yield made
    made.close()


def _ids(*results) -> list[str]:
    return [p.proxy_id for r in results for p in r.proxies]


def test_a_promoted_replica_with_every_write_starts_one_new_generation_and_keeps_the_data(pair):
    old = pair.pool(pair.primary)
    pair.stock(old)
    before = old.extract(ExtractRequest("c1", 4, idempotency_key="k1"))
    pair.synced()
    assert pair.meta(pair.replica)["replid"] == pair.meta(pair.primary)["replid"]
    pair.lose_primary()
    pair.promote()

    # Several processes reach the new master at once: exactly one new generation.
    pools = [pair.pool(pair.replica) for _ in range(4)]
    answers: list[str] = []
    start = threading.Barrier(len(pools))

    def first_extract(pool: RedisPool) -> None:
        start.wait()
        answers.append(pool.extract(ExtractRequest("c2", 1)).generation)

    threads = [threading.Thread(target=first_extract, args=(p,)) for p in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == len(pools)
    assert len(set(answers)) == 1 and before.generation not in answers, answers
    rest = pools[0].extract(ExtractRequest("c3", PROXIES))
    assert rest.generation == answers[0]
    # The data came over: nothing extracted before is handed out again, in any generation.
    assert len(_ids(rest)) == PROXIES - 4 - len(pools)
    assert len(set(_ids(before, rest))) == len(_ids(before, rest)), _ids(before, rest)
    # A retry of the first call replays it, under the generation its proxies came from.
    again = pools[1].extract(ExtractRequest("c1", 4, idempotency_key="k1"))
    assert again.replayed and _ids(again) == _ids(before)
    assert again.generation == before.generation != rest.generation


def test_writes_the_failover_lost_are_handed_out_again_only_under_a_new_generation(pair):
    old = pair.pool(pair.primary)
    pair.stock(old)
    kept = old.extract(ExtractRequest("c1", 2))
    pair.synced()
    with pair.replication_held():
        # Acknowledged by the primary, never applied by the replica.
        lost = old.extract(ExtractRequest("c2", 3, idempotency_key="k2"))
        assert lost.generation == kept.generation
        pair.lose_primary()
    pair.promote()

    new = pair.pool(pair.replica)
    retry = new.extract(ExtractRequest("c2", 3, idempotency_key="k2"))
    # The replay record went with the extract: the retry is a new extract, in a new generation.
    assert not retry.replayed and retry.generation != kept.generation
    rest = new.extract(ExtractRequest("c3", PROXIES))
    assert rest.generation == retry.generation
    again = set(_ids(lost)) & set(_ids(retry, rest))
    assert again == set(_ids(lost)), "the lost extract's proxies are AVAILABLE again"
    for generation in (kept.generation, retry.generation):  # never twice in one generation
        handed = [
            pid for r in (kept, lost, retry, rest) if r.generation == generation for pid in _ids(r)
        ]
        assert len(handed) == len(set(handed)), (generation, handed)
    assert set(_ids(retry, rest)).isdisjoint(_ids(kept))


def test_a_stale_connection_to_the_demoted_master_writes_nothing_back(pair):
    old = pair.pool(pair.primary)
    pair.stock(old)
    first = old.extract(ExtractRequest("c1", 1))
    pair.synced()
    pair.promote()
    new = pair.pool(pair.replica)
    second = new.extract(ExtractRequest("c2", 1))
    assert second.generation != first.generation
    promoted = pair.meta(pair.replica)
    with pair.admin(pair.primary) as client:  # Sentinel turns the old master into a replica
        client.replicaof("127.0.0.1", pair.replica.port)
    with pytest.raises(StoreUnavailable):
        old.extract(ExtractRequest("c3", 1))  # its connection learned the old history
    assert pair.meta(pair.replica) == promoted
    assert new.extract(ExtractRequest("c4", 1)).generation == second.generation


def test_a_generation_without_a_stored_history_adopts_the_servers_and_stays(pair):
    """The first run after the upgrade: META has a generation but no replication ID."""
    pool = pair.pool(pair.primary)
    pair.stock(pool)
    first = pool.extract(ExtractRequest("c1", 1))
    meta = f"{pair.prefix}:{{activity}}:meta"
    with pair.admin(pair.primary) as client:
        replid = client.hget(meta, "replid")
        assert replid == client.info("replication")["master_replid"]
        client.hdel(meta, "replid")
    assert pool.extract(ExtractRequest("c2", 1)).generation == first.generation
    assert pair.meta(pair.primary)["replid"] == replid


def test_a_new_history_ends_every_worker_session_and_moves_the_counters_past_the_old(pair):
    """A pool that only serves gateways learns of the failover from a worker's heartbeat."""
    old = pair.pool(pair.primary)
    pair.stock(old)
    first = old.extract(ExtractRequest("c1", 1))
    held = old.open_session("w1", "s1", MIN)
    old.open_session("w2", "s2", MIN)
    assigned = old.assign(pair.clock.now(), "p5", "w1", MIN)
    drained = old.begin_drain("p5", "w1", assigned.epoch)
    pair.synced()
    pair.promote()

    new = pair.pool(pair.replica)
    again = new.open_session("w1", "s1", MIN)  # the heartbeat of the same worker instance
    assert again.generation > held.generation + 100_000  # a new session, past any lost one
    assert new.worker_revision("w2").session is None  # every session of the old history ended
    assert new.assign(pair.clock.now(), "p6", "w2", MIN).epoch > drained.epoch + 100_000
    assert new.extract(ExtractRequest("c2", 1)).generation != first.generation
    # Ended once: the next heartbeat renews the new session.
    assert new.open_session("w1", "s1", MIN).generation == again.generation


def test_a_client_not_allowed_info_still_extracts_and_compares_no_history(private_redis):
    """An ACL without INFO: the connection knows no replication ID, the pool works, and no
    history is stored to compare (a failover there ends no generation: docs/DECISIONS.md)."""
    server = private_redis()
    with redis.Redis.from_url(server.url) as admin:
        admin.acl_setuser(
            "pool", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
        )
    client = redis.Redis(port=server.port, username="pool", password="pw", socket_timeout=5)
    clock = ManualClock(datetime.now(UTC))
    pool = RedisPool(client, PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}"), clock=clock)
    try:
        assert pool.extract(ExtractRequest("c1", 1)).generation
        with redis.Redis.from_url(server.url, decode_responses=True) as admin:
            meta = admin.hgetall(f"{pool.options.prefix}:{{activity}}:meta")
        assert "generation" in meta and "replid" not in meta
    finally:
        pool.close()


def test_a_new_replication_id_for_the_same_data_ends_nothing_even_on_old_connections(
    private_redis, tmp_path
):
    """A master takes a new replication ID with its data whole when its first replica attaches
    (and when it frees its backlog): no generation ends, no session is fenced, and connections
    made before the change, still carrying the old ID, end nothing either (they ask again)."""
    server = private_redis()
    prefix = f"t{uuid.uuid4().hex[:12]}"
    clock = ManualClock(datetime.now(UTC))

    def pool() -> RedisPool:
        return RedisPool(redis.Redis.from_url(server.url, socket_timeout=5),
                         PoolOptions(prefix=prefix), clock=clock)  # fmt: skip

    early = pool()
    stock(early, clock, PROXIES)
    first = early.extract(ExtractRequest("c1", 1))
    session = early.open_session("w1", "s-1", timedelta(minutes=5))
    with redis.Redis.from_url(server.url, decode_responses=True) as admin:
        before = admin.info("replication")["master_replid"]
        replica = RedisServer(tmp_path / "r", args=("--replicaof", "127.0.0.1", str(server.port)))
        replica.start()
        try:
            deadline = time.monotonic() + 10
            while admin.info("replication")["master_replid"] == before:
                assert time.monotonic() < deadline, "the master kept its replication ID"
                time.sleep(0.02)
            late = pool()  # learns the new ID
            answers = [p.extract(ExtractRequest("c2", 1)) for p in (late, early, late, early)]
            assert {a.generation for a in answers} == {first.generation}
            again = early.open_session("w1", "s-1", timedelta(minutes=5))
            assert again.generation == session.generation  # the same session, renewed
            assert late.open_session("w1", "s-1", timedelta(minutes=5)).generation == (
                session.generation
            )
        finally:
            replica.kill()
            early.close()


def test_a_busy_server_fails_the_connection_rather_than_leaving_it_blind(private_redis):
    """INFO answered BUSY (a long script) while a connection is made: the call fails and the
    next one, on a new connection, learns the replication ID (a connection that took "" would
    never see a failover)."""
    server = private_redis()
    prefix = f"t{uuid.uuid4().hex[:12]}"
    with redis.Redis.from_url(server.url) as admin:
        admin.config_set("busy-reply-threshold", 100)
    busy = threading.Thread(
        target=lambda: redis.Redis.from_url(server.url, socket_timeout=60).eval(
            "local i = 0 while i < 100000000 do i = i + 1 end return 1", 0
        )
    )
    busy.start()
    time.sleep(0.3)  # past busy-reply-threshold: other clients are answered BUSY
    pool = RedisPool(
        redis.Redis.from_url(server.url, socket_timeout=10), PoolOptions(prefix=prefix)
    )
    try:
        with pytest.raises(StoreUnavailable):
            pool.extract(ExtractRequest("c1", 1))
        busy.join(60)
        pool.extract(ExtractRequest("c1", 1))
        with redis.Redis.from_url(server.url, decode_responses=True) as admin:
            meta = admin.hgetall(f"{prefix}:{{activity}}:meta")
            assert meta["replid"] == admin.info("replication")["master_replid"]
    finally:
        busy.join(60)
        pool.close()


def test_a_counter_the_lost_writes_made_jumps_on_the_new_master_too(pair):
    """The session-generation counter first made in the lost window (no session before it) is
    missing on the promoted replica: it still starts past the jump, not at 1 again."""
    old = pair.pool(pair.primary)
    pair.stock(old)
    old.extract(ExtractRequest("c1", 1))
    pair.synced()
    with pair.replication_held():
        lost = old.open_session("w1", "s-1", timedelta(minutes=5))  # the counter's first value
        pair.lose_primary()
    pair.promote()
    new = pair.pool(pair.replica)
    after = new.open_session("w1", "s-2", timedelta(minutes=5))
    assert lost.generation == 1
    assert after.generation > 1_000_000
