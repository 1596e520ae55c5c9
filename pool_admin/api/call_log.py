"""The API's call log: one line per extract or outcome call, the one function every such call
goes through to be logged.

``log_call(event)`` queues one line; a daemon thread per process writes what is queued every
``FLUSH_INTERVAL_S`` as ONE log record of the ``pool_admin.calls`` logger, one line per call:
``call {json}``, each with its own ``at`` (Unix seconds, ms precision). It is a log for
operators; the counts the metrics aggregate travel apart, as usage events on the stream
(pool_admin/metrics/stream.py). Why batched: a log record per request cost ~90 µs of the API's
~750 µs of in-process CPU per extract (docs/PERFORMANCE.md); queueing one costs a few µs.

Bounds (activity/log_batches.py): at most ``MAX_QUEUED`` lines wait, beyond that they are
counted and dropped and the next batch says how many; what is queued at a normal exit (also of
a web-server worker stopped gracefully) is written, a killed process loses at most one interval.

A line never carries a secret: callers pass IDs, counts and labels only, and ``log_call``
drops any key that looks like one as a last guard.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from activity.log_batches import LogBatches
from pool_admin import bootstrap

logger = logging.getLogger("pool_admin.calls")

#: Words that mark a field as secret-bearing; such fields are dropped, never logged.
_FORBIDDEN = ("password", "secret", "token", "authorization", "api_key", "credential")
#: Field name -> whether it may be logged (calls use a handful of fixed names).
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


def new_call_log() -> LogBatches:
    """The batches of a process's call log (built once, by pool_admin/bootstrap.py)."""
    return LogBatches(
        logger, name="call log", max_queued=MAX_QUEUED, interval_s=FLUSH_INTERVAL_S, unit="calls"
    )


def log_call(event: dict[str, Any]) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    safe = {k: v for k, v in event.items() if _may_log(k)}
    safe["at"] = round(time.time(), 3)
    bootstrap.call_log().add(
        "call " + orjson.dumps(safe, option=orjson.OPT_SORT_KEYS, default=str).decode()
    )


def flush_call_log() -> None:
    """Write every queued line now (tests; commands that print before they exit)."""
    bootstrap.call_log().flush()


def call_lines(messages: list[str]) -> list[str]:
    """The ``call {json}`` lines in log messages of the call logger (tests, tools)."""
    return [line for m in messages for line in m.splitlines() if line.startswith("call {")]
