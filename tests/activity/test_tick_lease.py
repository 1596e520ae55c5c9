"""The tick lease's contract (activity/tick_lease/contract.py) against every implementation,
and its Lua library's header rules."""

from __future__ import annotations

import uuid

import pytest
import redis

from activity.lua_functions import LUA_DIR
from activity.tick_lease import MemoryTickLease
from activity.tick_lease.contract import *  # noqa: F403 - the Test* classes are the suite
from activity.tick_lease.redis import LEASE_LIBRARY
from tests.harness.lua import check_files_are_loaded, check_header


@pytest.fixture(params=["memory", "redis"])
def make_lease(request):
    if request.param == "memory":
        return MemoryTickLease
    from activity.tick_lease.redis import RedisTickLease

    client = redis.Redis.from_url(request.getfixturevalue("redis_url"), socket_timeout=10)
    request.addfinalizer(client.close)
    # Each lease store its own namespace on the shared server: nothing is ever flushed.
    return lambda: RedisTickLease(client, prefix=f"t{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize(("name", "path"), LEASE_LIBRARY.operations)
def test_every_operation_has_the_header(name, path):
    check_header(path, name)


def test_every_file_is_the_library_or_an_operation_it_loads():
    check_files_are_loaded(LEASE_LIBRARY, LUA_DIR / "lease")


def test_an_abandoned_lease_frees_its_key(redis_url):
    """The key's own TTL (twice the lease) lets an abandoned lease free itself: an idle
    namespace leaves nothing behind."""
    from datetime import UTC, datetime, timedelta

    from activity.tick_lease.redis import RedisTickLease

    client = redis.Redis.from_url(redis_url)
    prefix = f"t{uuid.uuid4().hex[:12]}"
    try:
        RedisTickLease(client, prefix).acquire("tick", "a", datetime.now(UTC), timedelta(seconds=5))
        ttl = client.pttl(f"{prefix}:{{lease}}:tick")
        assert 5_000 < ttl <= 10_000
    finally:
        client.delete(f"{prefix}:{{lease}}:tick")
        client.close()
