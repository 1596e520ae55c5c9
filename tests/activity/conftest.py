"""Plugs pool implementations into the activity contract suite."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import redis

from activity import ManualClock, MemoryPool, PoolOptions, StaticCredentials
from activity.contract import PoolHarness
from activity.redis import RedisPool
from pool_admin.forward_proxies import Microsocks, Tinyproxy
from tests.harness.netfault import CuttingRelay


def _memory_factory(request: pytest.FixtureRequest) -> Callable[..., PoolHarness]:
    def make(options: PoolOptions | None = None) -> PoolHarness:
        clock, server_clock = ManualClock(), ManualClock()
        credentials = StaticCredentials()
        options = options or PoolOptions()
        pool = MemoryPool(options, clock=clock, server_clock=server_clock, credentials=credentials)
        return PoolHarness(
            pool, clock, credentials, options, server_clock.advance, _memory_index_size(pool)
        )

    return make


def _redis_factory(request: pytest.FixtureRequest) -> Callable[..., PoolHarness]:
    url = request.getfixturevalue("redis_url")
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    request.addfinalizer(client.close)

    def make(options: PoolOptions | None = None) -> PoolHarness:
        # Each pool gets its own namespace on the shared server: nothing is ever flushed.
        prefix = f"t{uuid.uuid4().hex[:12]}"
        options = options or PoolOptions()
        options = PoolOptions(**{**_fields(options), "prefix": prefix})
        clock = ManualClock()
        credentials = StaticCredentials()
        pool = RedisPool(client, options, clock=clock, credentials=credentials)
        request.addfinalizer(pool.close)  # its own connections (the client's are closed above)
        # Session and report TTLs run on the server's clock: real time has to pass.
        return PoolHarness(
            pool, clock, credentials, options, _sleep, _redis_index_size(client, prefix)
        )

    return make


def _memory_index_size(pool: MemoryPool) -> Callable[[str, str], int]:
    # MemoryPool keeps its AVAILABLE indexes as (dimension, value) -> ZSet, "" for `available`,
    # and an upstream's recheck index (Redis: checks:<upstream>) as checkable[upstream].
    def size(dimension: str, value: str) -> int:
        if dimension == "checks":
            return len(pool._state.checkable.get(value) or ())
        return len(pool._state.indexes.get((dimension, value)) or ())

    return size


def _redis_index_size(client: redis.Redis, prefix: str) -> Callable[[str, str], int]:
    # The ADR's key space: <prefix>:{activity}:available, <prefix>:{activity}:region:<value>, ...
    def size(dimension: str, value: str) -> int:
        name = "available" if dimension == "available" else f"{dimension}:{value}"
        return int(client.zcard(f"{prefix}:{{activity}}:{name}"))

    return size


def _sleep(delta: timedelta) -> None:
    time.sleep(delta.total_seconds())


def _fields(options: PoolOptions) -> dict[str, object]:
    return {name: getattr(options, name) for name in PoolOptions.__dataclass_fields__}


FACTORIES = {"memory": _memory_factory, "redis": _redis_factory}


@pytest.fixture(params=sorted(FACTORIES))
def make_pool(request: pytest.FixtureRequest) -> Iterator[Callable[..., PoolHarness]]:
    yield FACTORIES[request.param](request)


@pytest.fixture(scope="module")
def proxies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tinyproxy, Microsocks]]:
    """Real local forward proxies: tinyproxy (HTTP, login demo1/pw1) and microsocks (SOCKS5,
    demo2/pw2), one pair per test module."""
    folder = tmp_path_factory.mktemp("proxies")
    with Tinyproxy(folder, "demo1", "pw1") as http, Microsocks(folder, "demo2", "pw2") as socks:
        yield http, socks  # type: ignore[misc]


@pytest.fixture
def relay(redis_url):
    """A CuttingRelay in front of the run's Redis, closed at the end."""
    port = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs["port"]
    relay = CuttingRelay(port)
    yield relay
    relay.close()
