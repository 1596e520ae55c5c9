"""The process-wide activity pool (``RedisPool``), built lazily from settings (the Redis URL,
the key prefix and ``POOL_BAN_QUARANTINE_S`` as ``PoolOptions.default_quarantine``).

One Redis client per process, shared by every request thread. ``RedisPool`` takes its replay
TTL from ``PoolOptions`` (one per pool, not per call), so clients with different idempotency
TTLs get pools that differ only in that option; they are few (one per distinct TTL, bounded by
``MAX_POOLS``) and each has its own small connection pool.

Tests call :func:`reset_pool` (optionally with a URL and prefix) to point it elsewhere, and
with a clock to move the pools' time.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import redis
from cachetools import LRUCache
from django.conf import settings

from activity import PoolOptions
from activity.clock import Clock
from activity.redis import RedisPool

#: Most pools (distinct idempotency TTLs) kept at once; older ones are dropped (and rebuilt).
MAX_POOLS = 32

_lock = threading.Lock()
_client: redis.Redis | None = None
_override: tuple[str, str] | None = None
_clock: Clock | None = None  # None: the pool's own (system) clock
_pools: LRUCache[timedelta | None, RedisPool] = LRUCache(maxsize=MAX_POOLS)


def target() -> tuple[str, str]:
    """The Redis URL and key prefix the pool uses now (settings, or a ``reset_pool`` override)."""
    if _override is not None:
        return _override
    return settings.REDIS_URL, settings.POOL_PREFIX


def get_pool(idempotency_ttl: timedelta | None = None) -> RedisPool:
    """The pool; with ``idempotency_ttl``, one whose extract replays live that long."""
    global _client
    pool = _pools.get(idempotency_ttl)
    if pool is not None:
        return pool
    with _lock:
        pool = _pools.get(idempotency_ttl)
        if pool is None:
            url, prefix = target()
            if _client is None:
                _client = redis.Redis.from_url(url)
            options = PoolOptions(
                prefix=prefix,
                default_quarantine=timedelta(seconds=settings.POOL_BAN_QUARANTINE_S),
            )
            if idempotency_ttl is not None:
                options = replace(options, idempotency_ttl=idempotency_ttl)
            pool = RedisPool(_client, options, clock=_clock)
            _pools[idempotency_ttl] = pool
        return pool


def reset_pool(
    url: str | None = None, prefix: str | None = None, clock: Clock | None = None
) -> None:
    """Forget every pool; with ``url``/``prefix``, later pools use them instead of settings;
    with ``clock`` (tests), they read that clock instead of the system's."""
    global _client, _override, _clock
    with _lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()
        _clock = clock
        if _client is not None:
            _client.close()
        _client = None
        if url is None and prefix is None:
            _override = None
        else:
            default_url, default_prefix = settings.REDIS_URL, settings.POOL_PREFIX
            _override = (url or default_url, prefix or default_prefix)
