"""Rechecks of idle proxies (activity/rechecking.py) on both pools, through real local forward
proxies (tinyproxy, microsocks) to a real local target: what is due is probed, what fails
leaves extraction, a SUSPECT proxy's second check decides, and a held proxy is never probed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import redis

from activity import ManualClock, MemoryPool, PoolOptions, RedisPool, StaticCredentials
from activity.checker import CheckTarget
from activity.rechecking import recheck
from activity.types import (
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ProxyState,
    RecheckPolicy,
)
from tests.harness.check_target import closed_port

pytestmark = pytest.mark.slow

MIN = timedelta(minutes=1)


class Harness:
    def __init__(self, pool, credentials: StaticCredentials, clock: ManualClock) -> None:
        self.pool, self.credentials, self.clock = pool, credentials, clock

    def stock(self, *entries: tuple[str, str, int, str, str]) -> None:
        """(proxy ID, protocol, port, username, password), AVAILABLE now, 30 minutes to live."""
        now = self.clock.now()
        proxies = [
            FetchedProxy(
                pid,
                f"k-{pid}",
                "127.0.0.1",
                port,
                protocol,
                now + 30 * MIN,
                secret_ref=self.credentials.put(user, password).ref,
            )
            for pid, protocol, port, user, password in entries
        ]
        self.pool.upsert_fetched(FetchedBatch("u1", proxies, 100, timedelta(seconds=5), now))
        self.pool.apply_health(
            [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies]
        )

    def recheck(self, url: str, **kwargs: object):
        return recheck("u1", pool=self.pool, check=CheckTarget(url), timeout=2, concurrency=10,
                       clock=self.clock, limit=100, **kwargs)  # type: ignore[arg-type]  # fmt: skip

    def extractable(self) -> list[str]:
        taken = self.pool.extract(ExtractRequest("c1", count=10, mode=ExtractMode.PARTIAL))
        return sorted(p.proxy_id for p in taken.proxies)


@pytest.fixture(params=["memory", "redis"])
def harness(request) -> Harness:
    credentials, clock = StaticCredentials(), ManualClock()
    if request.param == "memory":
        return Harness(MemoryPool(PoolOptions(), clock=clock, credentials=credentials),
                       credentials, clock)  # fmt: skip
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"), socket_timeout=10)
    request.addfinalizer(client.close)
    options = PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}")
    pool = RedisPool(client, options, clock=clock, credentials=credentials)
    request.addfinalizer(pool.close)
    return Harness(pool, credentials, clock)


def test_due_proxies_are_probed_through_themselves_and_a_refusing_one_leaves(
    harness, proxies, target
):
    http, socks = proxies
    harness.stock(("http", "http", http.port, "demo1", "pw1"),
                  ("socks", "socks5", socks.port, "demo2", "pw2"),
                  ("dead", "http", closed_port(), "demo1", "pw1"))  # fmt: skip
    harness.clock.advance(MIN)  # a tenth of what is left is about 3 minutes: none due yet
    before = target.requests
    assert harness.recheck(target.url()).listed == 0
    harness.clock.advance(3 * MIN)
    report = harness.recheck(target.url())
    assert (report.listed, report.checks.checked, report.complete) == (3, 3, True)
    assert report.checks.states == {"available": 2, "unhealthy": 1}
    assert report.checks.health.applied == 3
    assert target.requests == before + 2  # through each working proxy once
    assert harness.recheck(target.url()).listed == 0  # taken and checked: not due again
    assert harness.extractable() == ["http", "socks"]


def test_a_failed_recheck_is_suspect_and_the_second_check_decides(harness, proxies, target):
    http, socks = proxies
    harness.stock(("a", "http", http.port, "demo1", "pw1"),
                  ("b", "socks5", socks.port, "demo2", "pw2"))  # fmt: skip
    harness.clock.advance(4 * MIN)
    failing = target.url("/status/500")  # the target's error: it may pass next time
    assert harness.recheck(failing).checks.states == {"suspect": 2}
    assert harness.extractable() == []  # SUSPECT is out of extraction
    harness.clock.advance(29 * timedelta(seconds=1))
    assert harness.recheck(target.url()).listed == 0  # a check interval after, not sooner
    harness.clock.advance(timedelta(seconds=1))
    policy = RecheckPolicy()
    due = harness.pool.take_due_checks("u1", harness.clock.now(), policy, 1)  # "a" only
    assert [c.proxy_id for c in due.checks] == ["a"]
    harness.pool.apply_health(
        [HealthUpdate("a", ProxyState.AVAILABLE, harness.clock.now())]  # "a" passed
    )
    assert harness.recheck(failing).checks.states == {"unhealthy": 1}  # "b" failed twice
    assert harness.extractable() == ["a"]


def test_held_proxies_are_never_probed_and_a_login_no_probe_can_carry_is_unhealthy(
    harness, proxies, target
):
    http, socks = proxies
    harness.stock(("held", "http", http.port, "demo1", "pw1"),
                  ("long-login", "socks5", socks.port, "u" * 256, "pw2"),
                  ("idle", "http", http.port, "demo1", "pw1"))  # fmt: skip
    assert harness.pool.assign(harness.clock.now(), "held", "w1", 10 * MIN).worker_id == "w1"
    harness.clock.advance(4 * MIN)
    before = target.requests
    report = harness.recheck(target.url())
    assert (report.listed, report.checks.checked) == (2, 1)  # "held" not listed; the login unprobed
    assert report.checks.states == {"available": 1, "unhealthy": 1}
    assert target.requests == before + 1


def test_a_result_from_a_state_another_check_changed_is_ignored(harness, proxies, target):
    """Two checkers on one proxy (its hold ran out): the other's pass lands first, then this
    one's failure, computed as a SUSPECT proxy's second failure (UNHEALTHY), is ignored."""
    http, _ = proxies
    harness.stock(("a", "http", http.port, "demo1", "pw1"))
    harness.pool.apply_health([HealthUpdate("a", ProxyState.SUSPECT, harness.clock.now())])
    harness.clock.advance(MIN)
    real = harness.pool

    class OtherCheckerFirst:
        def take_due_checks(self, *args):
            listed = real.take_due_checks(*args)
            real.apply_health([HealthUpdate("a", ProxyState.AVAILABLE, harness.clock.now())])
            return listed

        def apply_health(self, updates):
            return real.apply_health(updates)

    report = recheck("u1", pool=OtherCheckerFirst(), check=CheckTarget(target.url("/status/500")),
                     timeout=2, concurrency=10, clock=harness.clock, limit=10)  # fmt: skip
    assert report.checks.states == {"unhealthy": 1} and report.checks.health.ignored == 1
    assert harness.extractable() == ["a"]  # the other checker's pass stands
