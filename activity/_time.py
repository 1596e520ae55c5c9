"""Millisecond time arithmetic shared by both pool implementations.

Redis stores scores as milliseconds since the Unix epoch; MemoryPool uses the same integers so
the two agree to the millisecond (the differential test compares them exactly).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def to_ms(value: datetime) -> int:
    """Aware datetime -> integer milliseconds since the epoch (floor)."""
    return (value - _EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def span_ms(value: timedelta) -> int:
    """Duration -> integer milliseconds (floor)."""
    return value // _MS
