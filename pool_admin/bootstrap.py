"""The composition root: every process-wide handle is built here, and only here.

The handles, each built from settings on first use:

* the activity pool (``get_pool``: ``RedisPool`` on ``REDIS_URL`` under ``POOL_PREFIX``, with
  ``POOL_BAN_QUARANTINE_S`` as its default quarantine) and the passwords' handover it resolves
  credentials through (``fetch_credentials``: fetched passwords held until their batch is
  written, in front of the credentials store);
* the fetch scheduler (``get_scheduler``: ``RedisScheduler`` on the pool's Redis and prefix);
* the tick leases (``tick_lease``: ``RedisTickLease`` on the pool's Redis and prefix: one ownership
  manager tick at a time);
* the usage event stream (``event_stream``: the producers' queue, pool_admin/metrics/stream.py);
* the API-key cache (``api_key_cache``: verified keys' principals, pool_admin/api/auth.py);
* the worker-token cache (``worker_token_cache``: verified gateway worker tokens' principals,
  pool_admin/api/gateway_auth.py);
* the API's call log (``call_log``: its lines written in batches, pool_admin/api/call_log.py);
* the gateway's snapshot publisher (``snapshot_publisher``, on the pool and its clock) and the
  gateway clients its snapshots carry (``gateway_clients``, pool_admin/gateway_clients.py).

Callers hold the narrow accessor and type against the ports (``ActivityPool``,
``FetchScheduler``), never against the Redis classes. One pool and one scheduler per process,
shared by every thread: per-client settings travel in each call, so the options are the same
for everyone.

Once per process, also after a fork: the Celery workers and the web server's workers are forked
from a parent that may have built handles already. A forked child forgets the pool, the
scheduler, the handover and the key caches and builds its own on first use, so it never shares a
connection with its parent or waits on a lock another thread of the parent held at the fork
(redis-py would also refuse a parent's connection in the child, by its PID; this does not rely
on it). The event stream and the call log empty themselves in the child (their own fork hook):
what was queued is the parent's to send.

``reset()`` is the one way to forget them: the pool's and the scheduler's connections are
closed, the queues written out, the key caches emptied; the next use builds from settings again.
``point_at(redis_url, prefix, clock)`` is the one way to build the pool and the scheduler
elsewhere (tests: a Redis of their own, a prefix no other test uses, a clock they move).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Generic, TypeVar

import redis
from django.conf import settings

from activity import PoolOptions, redis_url
from activity.clock import Clock, SystemClock
from activity.credentials import FetchCredentials
from activity.ports import ActivityPool
from activity.redis import RedisPool
from activity.scheduler import FetchScheduler
from activity.scheduler.redis import RedisScheduler
from activity.snapshot_publisher import PublisherPolicy, SnapshotPublisher
from activity.tick_lease import TickLease
from activity.tick_lease.redis import RedisTickLease

if TYPE_CHECKING:  # built on first use: these import Django's models and the handles
    from activity.log_batches import LogBatches
    from pool_admin.api.auth import KeyCache, Principal
    from pool_admin.api.gateway_auth import WorkerPrincipal
    from pool_admin.gateway_clients import GatewayClientsCache
    from pool_admin.metrics.stream import EventStream

#: Bounds every call of the scheduler on a Redis that stopped answering.
SCHEDULER_SOCKET_TIMEOUT_S = 5

T = TypeVar("T")

# Re-entrant: building the pool builds the handover it resolves credentials through.
_lock = threading.RLock()


class _Lazy(Generic[T]):
    """A handle built by ``build`` on first use, under the root's lock, then kept."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self.value: T | None = None

    def get(self) -> T:
        value = self.value
        if value is None:
            with _lock:
                if self.value is None:
                    self.value = self._build()
                value = self.value
        return value


@dataclass(frozen=True)
class Target:
    """Where the pool and the scheduler live: a Redis URL and the key prefix on it."""

    redis_url: str
    prefix: str


class _Handles:
    """The handles one process builds on first use and forgets on a reset or a fork."""

    def __init__(self) -> None:
        self.clients: list[redis.Redis] = []  # the Redis clients built here, to close
        self.pool = _Lazy(self._pool)
        self.scheduler = _Lazy(self._scheduler)
        self.credentials = _Lazy(_handover)
        self.keys = _Lazy(_key_cache)
        self.worker_tokens = _Lazy(_token_cache)
        self.leases = _Lazy(self._leases)
        self.publisher = _Lazy(self._publisher)
        self.gateway_clients = _Lazy(_clients_cache)

    def _pool(self) -> RedisPool:
        where = target()
        client = redis_url.connect(where.redis_url)
        self.clients.append(client)
        options = PoolOptions(
            prefix=where.prefix,
            default_quarantine=timedelta(seconds=settings.POOL_BAN_QUARANTINE_S),
        )
        return RedisPool(client, options, clock=_clock, credentials=self.credentials.get())

    def _scheduler(self) -> RedisScheduler:
        where = target()
        client = redis_url.connect(where.redis_url, socket_timeout=SCHEDULER_SOCKET_TIMEOUT_S)
        self.clients.append(client)
        return RedisScheduler(client, prefix=where.prefix)

    def _leases(self) -> RedisTickLease:
        where = target()
        client = redis_url.connect(where.redis_url, socket_timeout=SCHEDULER_SOCKET_TIMEOUT_S)
        self.clients.append(client)
        return RedisTickLease(client, prefix=where.prefix)

    def _publisher(self) -> SnapshotPublisher:
        policy = PublisherPolicy(
            max_proxies=PoolOptions().max_report_entries,
            max_staleness=timedelta(seconds=settings.GATEWAY_MAX_STALENESS_S),
        )
        return SnapshotPublisher(self.pool.get(), _clock or SystemClock(), policy)

    def close(self) -> None:
        if self.pool.value is not None:
            self.pool.value.close()
        for client in self.clients:
            client.close()


def _handover() -> FetchCredentials:
    from pool_admin.config.credential_store import CredentialStore  # needs Django's apps

    return FetchCredentials(CredentialStore())


def _key_cache() -> KeyCache[Principal]:
    from pool_admin.api.auth import KeyCache

    return KeyCache()


def _token_cache() -> KeyCache[WorkerPrincipal]:
    from pool_admin.api.auth import KeyCache

    return KeyCache()


def _clients_cache() -> GatewayClientsCache:
    from pool_admin.gateway_clients import GatewayClientsCache

    return GatewayClientsCache()


def _event_stream() -> EventStream:
    from pool_admin.metrics.stream import EventStream

    return EventStream()


def _call_log() -> LogBatches:
    from pool_admin.api.call_log import new_call_log

    return new_call_log()


_handles = _Handles()
_target: Target | None = None  # None: settings
_clock: Clock | None = None  # None: the pool's own (system) clock
# Built once per process and never replaced (a reset writes them out instead): their own fork
# hooks and exit flushes are registered once, and the web server's bridge holds a bound method.
_events = _Lazy(_event_stream)
_calls = _Lazy(_call_log)


def target() -> Target:
    """Where the pool and the scheduler are built now (settings, or ``point_at``'s)."""
    if _target is not None:
        return _target
    return Target(settings.REDIS_URL, settings.POOL_PREFIX)


def get_pool() -> ActivityPool:
    """The process's activity pool."""
    return _handles.pool.get()


def get_scheduler() -> FetchScheduler:
    """The process's fetch scheduler, on the pool's Redis under the pool's prefix."""
    return _handles.scheduler.get()


def tick_lease() -> TickLease:
    """The process's tick leases (one holder at a time for a periodic job), on the pool's
    Redis under the pool's prefix."""
    return _handles.leases.get()


def fetch_credentials() -> FetchCredentials:
    """The process's passwords' handover: what a fetch worker's vendor answers carried, held
    until their batch is written (pool_admin/fetch_tasks.py), in front of the credentials
    store; the pool resolves credentials through it."""
    return _handles.credentials.get()


def api_key_cache() -> KeyCache[Principal]:
    """The process's cache of verified API keys (pool_admin/api/auth.py)."""
    return _handles.keys.get()


def worker_token_cache() -> KeyCache[WorkerPrincipal]:
    """The process's cache of verified gateway worker tokens (pool_admin/api/gateway_auth.py)."""
    return _handles.worker_tokens.get()


def snapshot_publisher() -> SnapshotPublisher:
    """The process's gateway snapshot publisher, on the pool and the pool's clock."""
    return _handles.publisher.get()


def gateway_clients() -> GatewayClientsCache:
    """The process's gateway clients, read from PostgreSQL at most every few seconds."""
    return _handles.gateway_clients.get()


def event_stream() -> EventStream:
    """The process's queue of usage events and the thread that sends them to the stream."""
    return _events.get()


def call_log() -> LogBatches:
    """The process's API call log: one line per extract or outcome call, written in batches."""
    return _calls.get()


def reset() -> None:
    """Forget every handle: connections closed, queued events and log lines written, the key
    caches emptied; the next use builds from settings (``point_at``'s target is forgotten)."""
    _reset(None, None)


def point_at(redis_url: str, prefix: str, clock: Clock | None = None) -> None:
    """Forget every handle (as ``reset``); the next pool and scheduler are built on
    ``redis_url`` under ``prefix``, the pool reading ``clock`` when one is given (tests)."""
    _reset(Target(redis_url, prefix), clock)


def _reset(where: Target | None, clock: Clock | None) -> None:
    global _handles, _target, _clock
    with _lock:
        old, _handles = _handles, _Handles()
        _target, _clock = where, clock
    old.close()
    for queue in (_events.value, _calls.value):
        if queue is not None:
            queue.flush()


def _forget_in_child() -> None:
    """After a fork, in the child: the parent's handles are left alone (closing them would not
    free the parent's sockets, and a lock another thread held at the fork is never released)."""
    global _lock, _handles
    _lock = threading.RLock()
    _handles = _Handles()


os.register_at_fork(after_in_child=_forget_in_child)
