"""Per-client rate limits, enforced in Redis so every web process shares them.

Two limits per API client, each a sliding window counter (``ratelimit.lua``: one small hash per
limit and client holding the current and the previous window's counts; the count at a moment is
the current window's plus the previous window's weighted by how much of it still overlaps the
last window length, rounded down). One Lua script call does both checks atomically, so an
extract costs one Redis round trip for its limits:

* ``requests_per_second``: every authenticated extract call (also one that fails later, e.g.
  with a 400 or 403) takes one unit; when none is left the call is a 429 before anything else
  (:meth:`ClientLimiter.hit_request` alone takes it for calls that go no further).
* ``proxies_per_minute``: counts the proxies an extract *returned*. :meth:`ClientLimiter.take`
  takes the request *and* ``count`` proxies in the same atomic step, before the pool is asked:
  the call is refused (429, nothing taken but its request) unless ``count`` more fit. After the
  pool answers, the shortfall is given back (:meth:`ClientLimiter.refund`: a partial extract
  that found 2 of 10 gives back 8; an idempotent replay, which hands out no new proxy, and a
  failed extract give back all). So concurrent calls can never together go over the limit; a
  call may instead be refused while another's reservation is in flight and later given back.
  A ``count`` above the per-minute limit can never fit (429 with the longest ``Retry-After``).

``Retry-After`` (whole seconds, at least 1, at most two windows): the time until the refused
cost would fit if nobody else took anything. If the current window alone holds more than
``limit - cost``, that is the rest of this window plus the part of the next one after which the
current count, decayed as the previous window's, leaves room; otherwise it is the time until the
previous window's decaying share leaves room.

Keys live under ``<POOL_PREFIX>:ratelimit`` in the pool's Redis and name the client
by its ID (the ``ApiClient`` name) and the limit, never by an API key, e.g.
``pp:ratelimit:{crawler-1}:rps/50/1s`` and ``pp:ratelimit:{crawler-1}:ppm/1000/60s``; a changed
limit starts a fresh count. The client ID is the keys' hash tag, so the script's two keys share a
slot should the deployment move to Redis Cluster. A Redis error propagates (the exception
handler turns it into 503 ``store_unavailable``): no limit check, no extract.

Windows follow Redis's clock (``TIME`` inside the script, Redis 7 replicates a script's
effects); tests pass a ``clock``. Why our own script rather than the ``limits`` library: README,
"Rate limits".
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import redis

from activity.redis.direct import pooled_call
from pool_admin import pool as pool_module
from pool_admin.api.problems import RateLimited

#: Seconds a limiter call may take before Redis counts as unavailable.
SOCKET_TIMEOUT_S = 2.0
RPS_WINDOW_S = 1
PPM_WINDOW_S = 60
SCRIPT = (Path(__file__).with_name("ratelimit.lua")).read_text()


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


@dataclass(frozen=True)
class Reservation:
    """Proxies taken from a client's per-minute limit ahead of an extract (see ``refund``)."""

    key: str
    window: int
    count: int


def retry_after(wait_ms: int, window_s: int) -> int:
    """Whole seconds for ``Retry-After``: at least 1, at most two windows."""
    return max(1, min(2 * window_s, math.ceil(wait_ms / 1000)))


class ClientLimiter:
    """The two limits of every client over one Redis."""

    def __init__(
        self, url: str, pool_prefix: str, clock: Callable[[], float] | None = None
    ) -> None:
        self.key_prefix = key_prefix(pool_prefix)
        self.redis = redis.Redis.from_url(
            url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S
        )
        self._sha = hashlib.sha1(SCRIPT.encode()).hexdigest()  # noqa: S324 - Redis's script ID
        self._pool = self.redis.connection_pool
        #: Seconds since the epoch; None: Redis's own clock.
        self._clock = clock

    def keys(self, client: Limited) -> tuple[str, str]:
        """The requests-per-second and proxies-per-minute keys of ``client``."""
        # {client}: a hash tag, so one script call's two keys share a Cluster slot.
        client_tag = f"{self.key_prefix}:{{{client.client_id}}}"
        return (
            f"{client_tag}:rps/{client.requests_per_second}/{RPS_WINDOW_S}s",
            f"{client_tag}:ppm/{client.proxies_per_minute}/{PPM_WINDOW_S}s",
        )

    def _run(self, keys: list[str], args: tuple[object, ...]) -> Any:
        """EVALSHA past redis-py's per-command wrapper (activity.redis.direct); a NOSCRIPT
        reply (restart, SCRIPT FLUSH) loads the script and runs it again, once."""
        command = ("EVALSHA", self._sha, len(keys), *keys, *args)
        try:
            return pooled_call(self._pool, *command)
        except redis.exceptions.NoScriptError:
            pooled_call(self._pool, "SCRIPT", "LOAD", SCRIPT)
            return pooled_call(self._pool, *command)

    def _now_ms(self) -> int:
        return -1 if self._clock is None else int(self._clock() * 1000)

    def hit_request(self, client: Limited) -> None:
        """Take one request from the client's per-second limit, or raise ``RateLimited``."""
        self.take(client, 0)

    def take(self, client: Limited, count: int) -> Reservation:
        """Take one request and ``count`` proxies atomically, or raise ``RateLimited``.

        A refusal of the proxies still takes the request. Give back what the extract did not
        hand out with :meth:`refund`.
        """
        rps_key, ppm_key = self.keys(client)
        args = (
            "take",
            self._now_ms(),
            client.requests_per_second,
            RPS_WINDOW_S * 1000,
            client.proxies_per_minute,
            PPM_WINDOW_S * 1000,
            count,
        )
        reply = self._run([rps_key, ppm_key], args)
        outcome = int(reply[0])
        if outcome == 0:
            return Reservation(ppm_key, int(reply[1]), count)
        if outcome == 1:
            wait = retry_after(int(reply[1]), RPS_WINDOW_S)
            raise RateLimited(
                f"More than {client.requests_per_second} requests per second; retry in {wait} s.",
                wait,
            )
        wait = retry_after(int(reply[1]), PPM_WINDOW_S)
        raise RateLimited(
            f"{count} more proxies would exceed {client.proxies_per_minute} per minute "
            f"(about {int(reply[2])} left); retry in {wait} s.",
            wait,
        )

    def refund(self, reservation: Reservation, units: int) -> bool:
        """Give back ``units`` of a reservation; False if its window no longer counts."""
        if units <= 0 or reservation.count <= 0:
            return False
        units = min(units, reservation.count)
        args = ("refund", self._now_ms(), PPM_WINDOW_S * 1000, reservation.window, units)
        reply = self._run([reservation.key], args)
        return bool(reply)

    def close(self) -> None:
        self.redis.close()


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
                _limiter[1].close()
            _limiter = (target, ClientLimiter(*target))
        return _limiter[1]
