"""Plugs pool implementations into the activity contract suite."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity import ManualClock, MemoryPool, PoolOptions, StaticCredentials
from activity.contract import PoolHarness


def _memory_pool(options: PoolOptions | None = None) -> PoolHarness:
    clock = ManualClock()
    server_clock = ManualClock()
    credentials = StaticCredentials()
    options = options or PoolOptions()
    pool = MemoryPool(options, clock=clock, server_clock=server_clock, credentials=credentials)

    def advance_server(delta: timedelta) -> None:
        server_clock.advance(delta)

    return PoolHarness(pool, clock, credentials, options, advance_server)


FACTORIES = {"memory": _memory_pool}


@pytest.fixture(params=sorted(FACTORIES))
def make_pool(request):
    return FACTORIES[request.param]
