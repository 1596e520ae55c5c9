"""A value read from PostgreSQL at most once per TTL per process, and kept while PostgreSQL
cannot answer: what the control plane serves from its configuration on a path that must keep
working through a database outage (the gateway clients a snapshot carries, the upstream names
a worker's traffic is counted under).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Generic, TypeVar

from django.db import DatabaseError, InterfaceError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class NeverRead(Exception):
    """The value could not be read, and none was read before."""


class KeptRead(Generic[T]):
    """``read()`` at most once per ``ttl``; when it fails with a database error (or one of
    ``also``), the last value read is kept and read again after the TTL; ``NeverRead`` when
    there is none (``initial`` None)."""

    def __init__(
        self,
        read: Callable[[], T],
        ttl: timedelta,
        what: str,
        *,
        initial: T | None = None,
        also: tuple[type[Exception], ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._what, self._initial = read, what, initial
        self._failures: tuple[type[Exception], ...] = (DatabaseError, InterfaceError, *also)
        self.ttl_s = ttl.total_seconds()
        self.clock = clock
        self._lock = threading.Lock()
        # A forked child (the web server and Celery fork) could inherit the lock held by a
        # thread the child does not have: it gets a lock of its own.
        os.register_at_fork(after_in_child=self._new_lock)
        self._value: T | None = initial
        self._read_at: float | None = None

    def current(self) -> T:
        with self._lock:
            now = self.clock()
            if self._read_at is not None and now - self._read_at < self.ttl_s:
                assert self._value is not None  # a read happened, or initial was given
                return self._value
            try:
                self._value = self._read()
            except self._failures as exc:
                if self._value is None:
                    raise NeverRead(self._what) from exc
                logger.warning(
                    "%s could not be read (%s); the last ones read are used",
                    self._what,
                    type(exc).__name__,
                )
            self._read_at = now  # read again after the TTL, answered or not
            return self._value

    def forget(self) -> None:
        """Read afresh at the next use (tests: a new database)."""
        with self._lock:
            self._value, self._read_at = self._initial, None

    def _new_lock(self) -> None:
        self._lock = threading.Lock()
