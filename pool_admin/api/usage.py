"""Usage events: the one narrow function every extract and outcome report goes through.

``emit_usage(event)`` queues one event; a daemon thread per process writes what is queued
every ``FLUSH_INTERVAL_S`` as ONE log record of the ``pool_admin.usage`` logger, one line per
event: ``usage {json}``, each with its own ``at`` (Unix seconds, ms precision). The metrics
issue will hand the same batches to a Redis Stream instead. Why batched: a log record per
request cost ~90 µs of the API's ~750 µs of in-process CPU per extract (docs/PERFORMANCE.md);
queueing one costs a few µs.

Bounds: at most ``MAX_QUEUED`` events wait; beyond that new events are counted and dropped,
and the next batch says how many. Events still queued when the process exits normally (also a
multiprocessing child, such as a web-server worker stopped gracefully) are written on the way
out; a killed process loses at most one interval of them.

An event never carries a secret: callers pass IDs, counts and labels only, and ``emit_usage``
drops any key that looks like one as a last guard.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import threading
import time
from typing import Any

import orjson

logger = logging.getLogger("pool_admin.usage")

#: Words that mark a field as secret-bearing; such fields are dropped, never logged.
_FORBIDDEN = ("password", "secret", "token", "authorization", "api_key", "credential")
#: Field name -> whether it may be logged (events use a handful of fixed names).
_allowed: dict[str, bool] = {}
MAX_QUEUED = 10_000
FLUSH_INTERVAL_S = 0.2


def _may_log(name: str) -> bool:
    allowed = _allowed.get(name)
    if allowed is None:
        allowed = not any(w in name.lower() for w in _FORBIDDEN)
        if len(_allowed) < 1_000:
            _allowed[name] = allowed
    return allowed


class _Queue:
    """Encoded events waiting for the writer thread of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Held while a batch is taken and written: a flush returns only once every event
        #: queued before it is written, also one the writer thread had already taken.
        self._write_lock = threading.Lock()
        self._lines: list[bytes] = []
        self._dropped = 0
        self._writing = False  # this process's writer thread runs (after_fork: not yet)

    def add(self, line: bytes) -> None:
        with self._lock:
            if len(self._lines) >= MAX_QUEUED:
                self._dropped += 1
                return
            self._lines.append(line)
            if not self._writing:
                self._writing = True
                threading.Thread(target=self._run, name="usage-writer", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            with self._lock:
                lines, dropped = self._lines, self._dropped
                self._lines, self._dropped = [], 0
            if dropped:
                logger.warning("usage: %d events dropped, over %d were queued", dropped, MAX_QUEUED)
            if lines:
                logger.info("usage %s", b"\nusage ".join(lines).decode())

    def after_fork(self) -> None:
        self._lock = threading.Lock()  # the parent's locks may have been held by another thread
        self._write_lock = threading.Lock()
        self._lines, self._dropped, self._writing = [], 0, False


_queue = _Queue()
os.register_at_fork(after_in_child=_queue.after_fork)
# Written on the way out by multiprocessing's finalizers: they run at a normal exit (from its
# atexit hook) and also in multiprocessing children, such as the web server's (granian's)
# workers stopped gracefully, which run no atexit hooks of their own.
multiprocessing.util.Finalize(None, _queue.flush, exitpriority=10)


def emit_usage(event: dict[str, Any]) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    safe = {k: v for k, v in event.items() if _may_log(k)}
    safe["at"] = round(time.time(), 3)
    _queue.add(orjson.dumps(safe, option=orjson.OPT_SORT_KEYS, default=str))


def flush_usage() -> None:
    """Write every queued event now (tests; commands that print before they exit)."""
    _queue.flush()


def usage_lines(messages: list[str]) -> list[str]:
    """The ``usage {json}`` lines in log messages of the usage logger (tests, tools)."""
    return [line for m in messages for line in m.splitlines() if line.startswith("usage {")]
