"""The scheduler's input checks, shared by both implementations: a bad value is an
``InvalidRequest`` before anything changes."""

from __future__ import annotations

from datetime import datetime

from activity._checks import MAX_MS, YEAR_MS, aware_ms, count, duration_ms, token
from activity._time import span_ms
from activity.errors import InvalidRequest
from activity.scheduler.types import (
    MAX_CALLS_PER_MINUTE,
    MAX_CALLS_PER_SECOND,
    MAX_CONCURRENCY,
    MAX_COOLDOWN,
    MAX_LEASE,
    MAX_PROXIES_PER_MINUTE,
    MAX_PROXIES_PER_TAKE,
    AccountLimits,
    Claim,
)


def account(account_id: object) -> str:
    return token(account_id, "account_id")


def ids(account_id: object, upstream_id: object) -> tuple[str, str]:
    return account(account_id), token(upstream_id, "upstream_id")


#: Latest instant the scheduler takes: an instant plus the longest lease or cooldown, or a
#: minute of calls, stays within the 14 digits Redis's Lua JSON keeps exact.
_LATEST_MS = MAX_MS - YEAR_MS


def instant(value: object, what: str = "now") -> int:
    ms = aware_ms(value, what)
    if ms > _LATEST_MS:
        raise InvalidRequest(f"{what} is out of range")
    return ms


def lease(value: object) -> int:
    return duration_ms(value, "lease", minimum=1, maximum=span_ms(MAX_LEASE))


def cooldown(value: object) -> int:
    return duration_ms(value, "cooldown", maximum=span_ms(MAX_COOLDOWN))


def limits(value: object) -> tuple[int, int, int]:
    """(concurrency, calls per second, calls per minute), 0 for no limit."""
    if not isinstance(value, AccountLimits):
        raise InvalidRequest("limits must be AccountLimits")
    per_second = per_minute = 0
    if value.calls_per_second is not None:
        per_second = count(
            value.calls_per_second, "calls_per_second", low=1, high=MAX_CALLS_PER_SECOND
        )
    if value.calls_per_minute is not None:
        per_minute = count(
            value.calls_per_minute, "calls_per_minute", low=1, high=MAX_CALLS_PER_MINUTE
        )
    concurrency = count(value.concurrency, "concurrency", low=1, high=MAX_CONCURRENCY)
    proxies_limit(value)  # checked with the rest, though a claim does not use it
    return concurrency, per_second, per_minute


def proxies_limit(value: object) -> int:
    """An account's proxies per minute, 0 for no limit."""
    if not isinstance(value, AccountLimits):
        raise InvalidRequest("limits must be AccountLimits")
    if value.proxies_per_minute is None:
        return 0
    return count(value.proxies_per_minute, "proxies_per_minute", low=1, high=MAX_PROXIES_PER_MINUTE)


def wanted(value: object) -> int:
    return count(value, "wanted", low=0, high=MAX_PROXIES_PER_TAKE)


def claim(value: object) -> tuple[str, str, str]:
    """(account, upstream, token) of a claim the caller holds."""
    if not isinstance(value, Claim):
        raise InvalidRequest("claim must be a Claim")
    account_id, upstream_id = ids(value.account_id, value.upstream_id)
    return account_id, upstream_id, token(value.token, "claim token")


def due(value: datetime | object, what: str) -> int:
    return instant(value, what)


def window_ms(per_second: int, per_minute: int) -> list[tuple[int, int]]:
    """The call windows that apply: (length in ms, most calls in it)."""
    return [(w, n) for w, n in ((1_000, per_second), (60_000, per_minute)) if n]
