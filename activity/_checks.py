"""Checks of one value (an instant, a duration, a count, a token) and the key digest.

Nothing here knows a domain type, so ``PoolOptions`` checks itself with these
(``activity.types`` imports this module, never the other way round); the per-port checks in
``activity._validation`` build on them.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

from activity._time import span_ms, to_ms
from activity.errors import InvalidRequest

#: Labels (upstream, client and worker IDs) become parts of Redis key names, so the pool
#: refuses any other shape (InvalidRequest); the admin validates the same pattern. A proxy's
#: region and carrier are vendors' words instead: activity/labels.py.
LABEL_MAX_LENGTH = 64
LABEL_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._:@+-]{{0,{LABEL_MAX_LENGTH - 1}}}"
_TOKEN = re.compile(LABEL_PATTERN)
#: A year bounds every TTL: key lifetimes stay finite and datetime arithmetic exact.
YEAR_MS = 366 * 24 * 3600 * 1000
#: Largest epoch, version or sequence: Redis's Lua JSON keeps 14 significant digits exactly.
MAX_COUNTER = 10**14 - 1
#: Latest instant accepted anywhere (year 5138 in ms, still exact in 14 digits).
MAX_MS = 10**14 - 1


def aware_ms(value: object, what: str, error: type[InvalidRequest] = InvalidRequest) -> int:
    if not isinstance(value, datetime):
        raise error(f"{what} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise error(f"{what} must be timezone-aware")
    ms = to_ms(value)
    if not 0 <= ms <= MAX_MS:  # before 1970 or unrepresentable: never a real proxy time
        raise error(f"{what} is out of range")
    return ms


def duration_ms(
    value: object,
    what: str,
    *,
    minimum: int = 0,
    maximum: int = YEAR_MS,
    error: type[InvalidRequest] = InvalidRequest,
) -> int:
    if not isinstance(value, timedelta):
        raise error(f"{what} must be a timedelta")
    ms = span_ms(value)
    if not minimum <= ms <= maximum:
        raise error(f"{what} must be between {minimum} ms and {maximum} ms")
    return ms


def count(
    value: object, what: str, *, low: int, high: int, error: type[InvalidRequest] = InvalidRequest
) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise error(f"{what} must be an integer")
    if not low <= value <= high:
        raise error(f"{what} must be between {low} and {high}")
    return value


def is_token(value: object) -> bool:
    """What ``token`` accepts, without building a message."""
    return type(value) is str and _TOKEN.fullmatch(value) is not None


def token(value: object, what: str, error: type[InvalidRequest] = InvalidRequest) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise error(f"{what} must be 1-64 characters of [A-Za-z0-9._:@+-]")
    return value


def digest(*parts: str) -> str:
    """Stable 128-bit digest used in key names; a digest never reveals its input."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()[:32]
