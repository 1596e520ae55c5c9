"""Fixtures shared by the pool_admin tests."""

from __future__ import annotations

import pytest

from pool_admin import bootstrap


@pytest.fixture
def filling_pool(redis_url, unique_prefix):
    """The process's pool and fetch scheduler on the test's Redis, under a prefix of its own."""
    bootstrap.point_at(redis_url, unique_prefix)
    yield
    bootstrap.reset()


@pytest.fixture(autouse=True)
def _configured_upstreams_read_afresh():
    """The gateway traffic's producer keeps the configured upstreams' names for a few seconds:
    each test has a database of its own, read afresh."""
    from pool_admin.metrics.gateway_events import forget_configured_upstreams

    forget_configured_upstreams()
    yield
    forget_configured_upstreams()
