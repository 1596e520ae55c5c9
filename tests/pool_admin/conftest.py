"""Fixtures shared by the pool_admin tests."""

from __future__ import annotations

import pytest

from pool_admin import fetch_tasks
from pool_admin.pool import reset_pool


@pytest.fixture
def filling_pool(settings, redis_url, unique_prefix):
    """The process's pool and fetch scheduler on the test's Redis, under a prefix of its own."""
    settings.REDIS_URL, settings.POOL_PREFIX = redis_url, unique_prefix
    reset_pool(redis_url, unique_prefix)
    fetch_tasks.reset()
    yield
    reset_pool()
    fetch_tasks.reset()
