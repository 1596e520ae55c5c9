"""Per-client rate limits, enforced in Redis so every web process shares them.

Two limits per API client, both counted with the ``limits`` library's sliding window counter
(one atomic Lua script per check, two small counters per limit and client):

* ``requests_per_second``: every authenticated extract call (also one that fails later, e.g.
  with a 400 or 403) takes one unit; when none is left the call is a 429 before anything else.
* ``proxies_per_minute``: counts the proxies an extract *returned*. Before the pool is asked,
  the call is refused (429) unless ``count`` more would fit in the window; after it, the number
  actually returned is consumed (a partial extract that found 2 of 10 uses 2, a replayed
  idempotent answer uses none: it hands out no new proxy). Two concurrent calls may both pass
  the check; if the second's consumption no longer fits, the window is filled to its limit
  instead, so the overshoot is bounded by what was in flight and the next call is refused.

Keys live under ``<POOL_PREFIX>:ratelimit`` in the pool's Redis and name the client by its ID
(the ``ApiClient`` name), never by an API key, e.g.
``pp:ratelimit:LIMITER/rps/crawler-1/50/1/second/<window>``. A Redis error propagates (the
exception handler turns it into 503 ``store_unavailable``): no limit check, no extract.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Protocol

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.storage import RedisStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from pool_admin import pool as pool_module
from pool_admin.api.problems import RateLimited

logger = logging.getLogger(__name__)

#: Seconds a limiter call may take before Redis counts as unavailable.
SOCKET_TIMEOUT_S = 2.0


class Limited(Protocol):
    """What the limiter needs of a client (``auth.Principal`` has it)."""

    @property
    def client_id(self) -> str: ...
    @property
    def requests_per_second(self) -> int: ...
    @property
    def proxies_per_minute(self) -> int: ...


def key_prefix(pool_prefix: str) -> str:
    return f"{pool_prefix}:ratelimit"


class ClientLimiter:
    """The two limits of every client over one Redis storage."""

    def __init__(self, url: str, pool_prefix: str) -> None:
        self.storage = RedisStorage(
            url,
            key_prefix=key_prefix(pool_prefix),
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
        )
        self.limiter = SlidingWindowCounterRateLimiter(self.storage)

    @staticmethod
    def _rps(client: Limited) -> RateLimitItem:
        return RateLimitItemPerSecond(client.requests_per_second, namespace="rps")

    @staticmethod
    def _ppm(client: Limited) -> RateLimitItem:
        return RateLimitItemPerMinute(client.proxies_per_minute, namespace="ppm")

    def hit_request(self, client: Limited) -> None:
        """Take one request from the client's per-second limit, or raise ``RateLimited``."""
        item = self._rps(client)
        if not self.limiter.hit(item, client.client_id):
            wait = self._wait(item, client.client_id, 1)
            raise RateLimited(
                f"More than {client.requests_per_second} requests per second; retry in {wait} s.",
                wait,
            )

    def check_proxies(self, client: Limited, count: int) -> None:
        """Raise ``RateLimited`` unless ``count`` more proxies fit in the per-minute limit."""
        item = self._ppm(client)
        if count > item.amount or not self.limiter.test(item, client.client_id, cost=count):
            wait = self._wait(item, client.client_id, count)
            remaining = self.limiter.get_window_stats(item, client.client_id).remaining
            raise RateLimited(
                f"{count} more proxies would exceed {client.proxies_per_minute} per minute "
                f"(about {remaining} left); retry in {wait} s.",
                wait,
            )

    def consume_proxies(self, client: Limited, returned: int) -> None:
        """Count ``returned`` proxies; if a concurrent call used the room, fill the window."""
        if returned <= 0:
            return
        item = self._ppm(client)
        if self.limiter.hit(item, client.client_id, cost=min(returned, item.amount)):
            return
        left = self.limiter.get_window_stats(item, client.client_id).remaining
        if left > 0:
            self.limiter.hit(item, client.client_id, cost=left)
        logger.info("client %s went over its proxies-per-minute limit", client.client_id)

    def _wait(self, item: RateLimitItem, client_id: str, cost: int) -> int:
        """Whole seconds until ``cost`` units fit again (at least 1, at most two windows)."""
        expiry = item.get_expiry()
        prev, prev_ttl, cur, cur_ttl = self.storage.get_sliding_window(
            item.key_for(client_id), expiry
        )
        room = item.amount - cost  # the weighted count must fall to this
        if room < 0:
            return 2 * expiry
        if cur > room:
            # The current counter (kept for two windows) must become the previous one, after
            # ``cur_ttl - expiry``, then decay far enough.
            wait = max(0.0, cur_ttl - expiry) + expiry * (1 - room / cur)
        elif prev > 0:
            # Only the previous window's share decays: prev * (prev_ttl - t) / expiry + cur.
            wait = prev_ttl - expiry * (room - cur) / prev
        else:
            wait = 0.0
        return max(1, min(2 * expiry, math.ceil(wait)))


_lock = threading.Lock()
_limiter: tuple[tuple[str, str], ClientLimiter] | None = None


def get_limiter() -> ClientLimiter:
    """The process-wide limiter, on the pool's Redis and prefix (follows ``reset_pool``)."""
    global _limiter
    target = pool_module.target()
    current = _limiter
    if current is not None and current[0] == target:
        return current[1]
    with _lock:
        if _limiter is None or _limiter[0] != target:
            if _limiter is not None:
                _limiter[1].storage.storage.close()
            _limiter = (target, ClientLimiter(*target))
        return _limiter[1]
