"""The ownership manager as separate processes on a real Redis, as Celery runs it: two managers
started at once never both act (the tick lease); a manager killed in the middle of its
assigns leaves nothing the next tick cannot finish."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from activity import PoolOptions, RedisPool
from activity.clock import SystemClock
from activity.ownership_manager import GroupConfig, ManagerPolicy, OwnershipManager
from activity.tick_lease.redis import RedisTickLease
from tests.activity.redis_pools import stock

pytestmark = pytest.mark.redis

LEASE = "ownership-manager"
PROXIES = 10
GROUP = GroupConfig("g1", PROXIES, ("u1",), frozenset({"w1"}))  # one connection each
SPAWN = multiprocessing.get_context("spawn")


class SlowAssigns:
    """The pool, with each assign taking ``delay_s`` and counted in ``done``."""

    def __init__(self, pool: RedisPool, delay_s: float, done: Any) -> None:
        self._pool, self._delay_s, self._done = pool, delay_s, done

    def assign(self, *args: Any) -> Any:
        time.sleep(self._delay_s)
        assignment = self._pool.assign(*args)
        with self._done.get_lock():
            self._done.value += 1
        return assignment

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def manage(
    url: str, prefix: str, ttl_s: float, delay_s: float, barrier: Any, done: Any, out: Any
) -> None:
    """A manager process: take the lease, tick with slow assigns, let the lease go; put
    whether it ticked and what it assigned."""
    client = redis.Redis.from_url(url, socket_timeout=10)
    pool = RedisPool(client, PoolOptions(prefix=prefix))
    lease, clock = RedisTickLease(client, prefix=prefix), SystemClock()
    holder, ttl = f"manager-{os.getpid()}", timedelta(seconds=ttl_s)
    if barrier is not None:
        barrier.wait(timeout=30)
    if not lease.acquire(LEASE, holder, clock.now(), ttl):
        out.put(None)
        return
    manager = OwnershipManager(SlowAssigns(pool, delay_s, done), clock, ManagerPolicy())  # type: ignore[arg-type]
    report = manager.tick(
        [GROUP], {}, keep_going=lambda: lease.renew(LEASE, holder, clock.now(), ttl)
    )
    lease.release(LEASE, holder, clock.now())
    out.put(report.groups["g1"].assigned)


@pytest.fixture
def world(redis_url):
    prefix = f"t{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    pool = RedisPool(client, PoolOptions(prefix=prefix))
    stock(pool, datetime.now(UTC), PROXIES)
    pool.open_session("w1", "s1", timedelta(minutes=5))
    yield redis_url, prefix, pool
    pool.close()  # its own connections
    client.close()


def holdings(pool: RedisPool) -> list[str]:
    return sorted(a.proxy_id for a in pool.worker_assignments("w1", 100).assignments)


def test_two_managers_started_at_once_never_both_act(world):
    url, prefix, pool = world
    barrier, out = SPAWN.Barrier(2), SPAWN.Queue()
    counters = [SPAWN.Value("i", 0), SPAWN.Value("i", 0)]
    managers = [
        SPAWN.Process(target=manage, args=(url, prefix, 30, 0.05, barrier, done, out))
        for done in counters
    ]
    for process in managers:
        process.start()
    results = sorted((out.get(timeout=60) for _ in managers), key=lambda r: r is not None)
    for process in managers:
        process.join(timeout=30)
    assert results == [None, PROXIES]  # one took the lease and did it all; the other nothing
    assert sorted(c.value for c in counters) == [0, PROXIES]
    assert len(holdings(pool)) == PROXIES


def test_a_manager_killed_mid_tick_leaves_what_the_next_tick_finishes(world):
    url, prefix, pool = world
    done, out = SPAWN.Value("i", 0), SPAWN.Queue()
    doomed = SPAWN.Process(target=manage, args=(url, prefix, 1.0, 0.2, None, done, out))
    doomed.start()
    deadline = time.monotonic() + 60
    while done.value < 3:  # killed after its third assign, in the middle of the fourth
        assert time.monotonic() < deadline and doomed.is_alive()
        time.sleep(0.01)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(timeout=10)
    left = holdings(pool)
    assert 3 <= len(left) < PROXIES

    client = redis.Redis.from_url(url, socket_timeout=10)
    lease, clock = RedisTickLease(client, prefix=prefix), SystemClock()
    assert not lease.acquire(LEASE, "next", clock.now(), timedelta(seconds=30))  # still held
    time.sleep(1.1)  # the dead holder's lease runs out
    assert lease.acquire(LEASE, "next", clock.now(), timedelta(seconds=30))
    report = OwnershipManager(pool, clock, ManagerPolicy()).tick([GROUP], {})
    assert report.groups["g1"].assigned == PROXIES - len(left)
    assert report.groups["g1"].refused == 0
    finished = holdings(pool)
    assert len(finished) == PROXIES and set(left) <= set(finished)
    assert (
        OwnershipManager(pool, clock, ManagerPolicy()).tick([GROUP], {}).groups["g1"].assigned == 0
    )
    client.close()
