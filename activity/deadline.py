"""Per-call deadlines for store operations.

Every pool call checks the innermost active deadline before it touches the store: a call whose
deadline has already passed raises :class:`DeadlineExceeded` and changes nothing. RedisPool
also bounds each wait on its socket (connecting, sending, reading the reply) by the time left
when the call starts, when that is shorter than its socket timeout: a call the deadline cuts
raises ``DeadlineExceeded`` too, its outcome unknown (a plain read: ``StoreUnavailable``).
Deadlines nest (the earliest wins) and follow the context (threads and asyncio tasks each see
their own).

    with deadline(timedelta(milliseconds=250)):
        pool.extract(request)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta

from activity.errors import DeadlineExceeded, InvalidRequest

_DEADLINE: ContextVar[float | None] = ContextVar("activity_deadline", default=None)


@contextmanager
def deadline(timeout: timedelta) -> Iterator[None]:
    """Bound every pool call inside the block to ``timeout`` from now."""
    if not isinstance(timeout, timedelta):
        raise InvalidRequest("deadline takes a timedelta")
    at = time.monotonic() + max(timeout.total_seconds(), 0.0)
    outer = _DEADLINE.get()
    token = _DEADLINE.set(at if outer is None else min(outer, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left before the active deadline, or None when no deadline is set."""
    at = _DEADLINE.get()
    return None if at is None else at - time.monotonic()


def check_deadline() -> float | None:
    """Raise DeadlineExceeded when the active deadline has passed (before any store access);
    else the seconds left, None when no deadline is set."""
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded("the call's deadline passed before it was sent; nothing changed")
    return left
