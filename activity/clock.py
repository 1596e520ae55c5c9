"""Clocks. The pool never calls ``datetime.now()`` directly so tests can move time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (contract tests, differential tests)."""

    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._lock = threading.Lock()
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError("time does not move backwards")
        with self._lock:
            self._now += delta
            return self._now

    def rewind(self, delta: timedelta) -> datetime:
        """Move the clock back, as a host's clock does when NTP corrects it (``advance``
        refuses that, so a test that means it says so)."""
        if delta < timedelta(0):
            raise ValueError("rewind takes a positive delta")
        with self._lock:
            self._now -= delta
            return self._now
