"""The process-wide activity pool (``RedisPool``), built lazily from settings (the Redis URL,
the key prefix and ``POOL_BAN_QUARANTINE_S`` as ``PoolOptions.default_quarantine``).

One pool and one Redis client per process, shared by every request thread. Per-client settings
travel in each call (a client's idempotency TTL as ``ExtractRequest.idempotency_ttl``), so the
pool's options are the same for everyone.

Tests call :func:`reset_pool` (optionally with a URL and prefix) to point it elsewhere, and
with a clock to move the pool's time.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import redis
from django.conf import settings

from activity import PoolOptions, SweepResult
from activity.clock import Clock
from activity.credentials import FetchCredentials
from activity.ports import ActivityPool
from activity.redis import RedisPool

_lock = threading.Lock()
_pool: RedisPool | None = None
_client: redis.Redis | None = None
_override: tuple[str, str] | None = None
_clock: Clock | None = None  # None: the pool's own (system) clock


def target() -> tuple[str, str]:
    """The Redis URL and key prefix the pool uses now (settings, or a ``reset_pool`` override)."""
    if _override is not None:
        return _override
    return settings.REDIS_URL, settings.POOL_PREFIX


def sweep_pool(limit: int) -> SweepResult:
    """One bounded sweep; the records it reports removed at expiry (since the previous sweep,
    wherever they were cleaned) go to the usage stream, used or not, per upstream. Every
    sweep goes through here: a sweep takes that tally, and one not told is lost."""
    from pool_admin.metrics.stream import emit_event

    result = get_pool().sweep(limit)
    for upstream, tally in result.tally.items():
        emit_event("expired", upstream=upstream, used=tally.used, unused=tally.unused)
    return result


def get_pool() -> ActivityPool:
    """The process's pool."""
    global _pool, _client
    pool = _pool
    if pool is not None:
        return pool
    with _lock:
        if _pool is None:
            url, prefix = target()
            _client = redis.Redis.from_url(url)
            options = PoolOptions(
                prefix=prefix,
                default_quarantine=timedelta(seconds=settings.POOL_BAN_QUARANTINE_S),
            )
            _pool = RedisPool(_client, options, clock=_clock, credentials=fetch_credentials())
        return _pool


_credentials: FetchCredentials | None = None


def fetch_credentials() -> FetchCredentials:
    """The process's credentials resolver: fetched passwords held until their batch is
    written (a fetch worker's, pool_admin/fetch_tasks.py), in front of the credentials store."""
    global _credentials
    if _credentials is None:
        from pool_admin.config.credential_store import CredentialStore

        _credentials = FetchCredentials(CredentialStore())
    return _credentials


def reset_pool(
    url: str | None = None, prefix: str | None = None, clock: Clock | None = None
) -> None:
    """Forget the pool; with ``url``/``prefix``, the next one uses them instead of settings;
    with ``clock`` (tests), it reads that clock instead of the system's."""
    global _pool, _client, _override, _clock
    with _lock:
        if _pool is not None:
            _pool.close()
        _pool = None
        if _client is not None:
            _client.close()
        _client = None
        _clock = clock
        if url is None and prefix is None:
            _override = None
        else:
            default_url, default_prefix = settings.REDIS_URL, settings.POOL_PREFIX
            _override = (url or default_url, prefix or default_prefix)
