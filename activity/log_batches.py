"""Log lines of the request path written in batches: ONE log record per interval, not one per line.

A log record per request is not cheap: Python's logging builds a record, formats it and writes
and flushes the stream for each line (12 µs of CPU to /dev/null, 15 µs to a pipe being read:
bench/access_log.py). :class:`LogBatches` queues a line (a list append under a lock) and a
daemon thread of the process writes what is queued every ``interval_s`` as one record, its
message the lines joined by newlines, so an operator's handlers, filters and levels
(settings.LOGGING) still apply to every line.

Bounds: at most ``max_queued`` lines wait; beyond that new lines are counted and dropped, and
a warning of this module's logger says how many. Lines still queued when the process exits normally
(also a multiprocessing child, such as a web-server worker stopped gracefully) are written on
the way out; a killed process loses at most one interval of them.

No Django here: the web server's bridge (pool_admin/rsgi_bridge.py) is given a batch's ``add``.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import threading
import time

_logger = logging.getLogger(__name__)


class LogBatches:
    """Lines for ``logger``, written by a daemon thread named ``f"{name}-writer"``.

    ``name`` also opens the warning of dropped lines, logged by ``activity.log_batches``
    (``"call log: 3 calls dropped, ..."``, with ``unit`` the lines' word).
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        name: str,
        max_queued: int,
        interval_s: float,
        unit: str = "lines",
    ) -> None:
        self.logger = logger
        self.name = name
        self.max_queued = max_queued
        self.interval_s = interval_s
        self.unit = unit
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        # Written on the way out by multiprocessing's finalizers: they run at a normal exit
        # (from its atexit hook) and also in multiprocessing children, such as the web server's
        # (granian's) workers stopped gracefully, which run no atexit hooks of their own.
        multiprocessing.util.Finalize(None, self.flush, exitpriority=10)

    def _reset(self) -> None:
        """A new, empty queue (also in a forked child: the parent's locks may have been held
        by another thread, and its writer thread is not there)."""
        self._lock = threading.Lock()
        #: Held while a batch is taken and written: a flush returns only once every line
        #: queued before it is written, also one the writer thread had already taken.
        self._write_lock = threading.Lock()
        self._lines: list[str] = []
        self._dropped = 0
        self._writing = False  # this process's writer thread runs

    def add(self, line: str) -> None:
        """Queue ``line`` (no newline in it: a line is what a reader splits on)."""
        with self._lock:
            if len(self._lines) >= self.max_queued:
                self._dropped += 1
                return
            self._lines.append(line)
            if not self._writing:
                self._writing = True
                thread = threading.Thread(target=self._run, name=f"{self.name}-writer", daemon=True)
                thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            self.flush()

    def flush(self) -> None:
        """Write every queued line now (tests; commands that print before they exit)."""
        with self._write_lock:
            with self._lock:
                lines, dropped = self._lines, self._dropped
                self._lines, self._dropped = [], 0
            if dropped:  # not to self.logger: its lines may be read as all of one format
                _logger.warning(
                    "%s: %d %s dropped, over %d were queued",
                    self.name,
                    dropped,
                    self.unit,
                    self.max_queued,
                )
            if lines:
                self.logger.info("%s", "\n".join(lines))
