"""Per-client rate limits of the API: the client's limits as the pool's ``CallQuota``, and its
refusals as 429 problems.

The pool counts both limits in Redis (so every web process shares them), in the same atomic
step as the extract they limit (``activity.CallQuota``, ``lua/extract.lua``): an extract is one
Redis round trip, limits included, and concurrent calls can never together go over a limit.

* ``requests_per_second``: every authenticated call takes one unit, whether it then succeeds or
  fails. An extract takes it inside the pool (a replay and an idempotency conflict too); a call
  refused before the pool is asked (a 400 or 403 of the body) and every other call (an outcome
  report, an inventory read: ``ApiView``, base.py) takes it with :func:`charge_call`. Over the
  limit the call is a 429 before anything else.
* ``proxies_per_minute``: counts the proxies extracts *returned*. An extract is refused (429,
  nothing taken but its request) unless ``count`` more fit; then only what it returned is
  charged (a partial extract that found 2 of 10 charges 2, a replay 0). A ``count`` above the
  per-minute limit can never fit (429 with the longest ``Retry-After``).

``Retry-After`` (whole seconds, at least 1, at most two windows): the time until the refused
units would fit if nobody else took anything, from the pool's exact millisecond.

The pool's keys name the client by its ID (the ``ApiClient`` name) and the limit, never by an
API key; a changed limit starts a fresh count. Windows follow the pool's clock. A Redis error
propagates (503 ``store_unavailable``): no limit check, no extract. The limits as clients see
them: docs/API.md, "Rate limits"; why they live in the pool: docs/DECISIONS.md (2026-11-30).
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Protocol

from activity import CallQuota
from activity.errors import QuotaExceeded
from pool_admin.api.problems import RateLimited
from pool_admin.bootstrap import get_pool

RPS_WINDOW = timedelta(seconds=1)
PPM_WINDOW = timedelta(minutes=1)


class Limited(Protocol):
    """What the limits need of a client (``auth.Principal`` has it)."""

    @property
    def client_id(self) -> str: ...
    @property
    def requests_per_second(self) -> int: ...
    @property
    def proxies_per_minute(self) -> int: ...


def quota_of(client: Limited) -> CallQuota:
    """The client's limits as the pool counts them."""
    return CallQuota(
        calls=client.requests_per_second,
        proxies=client.proxies_per_minute,
        call_window=RPS_WINDOW,
        proxy_window=PPM_WINDOW,
    )


def retry_after(wait_ms: int, window: timedelta) -> int:
    """Whole seconds for ``Retry-After``: at least 1, at most two windows."""
    return max(1, min(2 * int(window.total_seconds()), math.ceil(wait_ms / 1000)))


def rate_limited(refusal: QuotaExceeded, client: Limited, count: int = 0) -> RateLimited:
    """The 429 for a refusal of the pool, naming the client's limit that refused."""
    if refusal.reason == "calls":
        wait = retry_after(refusal.retry_after_ms, RPS_WINDOW)
        return RateLimited("calls", client.requests_per_second, wait, count, refusal.left)
    wait = retry_after(refusal.retry_after_ms, PPM_WINDOW)
    return RateLimited("proxies", client.proxies_per_minute, wait, count, refusal.left)


def charge_call(client: Limited) -> None:
    """Take one request of a call that does not extract, or raise ``RateLimited``."""
    try:
        get_pool().charge_call(client.client_id, quota_of(client))
    except QuotaExceeded as refusal:
        raise rate_limited(refusal, client) from None
