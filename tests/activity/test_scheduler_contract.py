"""The fetch scheduler's contract (activity/scheduler/contract.py) against every implementation."""

from __future__ import annotations

import uuid

import pytest
import redis

from activity.scheduler import MemoryScheduler
from activity.scheduler.contract import *  # noqa: F403 - the Test* classes are the suite


@pytest.fixture(params=["memory", "redis"])
def make_scheduler(request):
    if request.param == "memory":
        return MemoryScheduler
    from activity.scheduler.redis import RedisScheduler

    client = redis.Redis.from_url(request.getfixturevalue("redis_url"), socket_timeout=10)
    request.addfinalizer(client.close)
    # Each scheduler its own namespace on the shared server: nothing is ever flushed.
    return lambda: RedisScheduler(client, prefix=f"t{uuid.uuid4().hex[:12]}")
