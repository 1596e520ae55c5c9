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
