"""The producers' one function: ``emit_event(kind, **fields)`` puts a usage event on the stream.

It never blocks on the stream's Redis and never fails its caller: the event is queued in the
process (a list append under a lock) and a daemon thread sends what is queued every
``INTERVAL_S`` as entries of up to ``events.MAX_ENTRY_EVENTS`` events each, in one pipeline of
``XADD ... MAXLEN ~`` (the stream stays bounded). An entry per event cost the extract API 7-8%
of its throughput (docs/PERFORMANCE.md); an entry per flush costs the stream one write per
process and interval, whatever the rate. When the
queue is full (``MAX_QUEUED``) or the stream's Redis does not answer, events are dropped and
counted (``dropped()``); a warning says how many, at most every ``WARN_EVERY_S``. An event the
consumer would refuse is a programming error: refused here too (``MalformedEvent``) and counted
as dropped, so a bad field never reaches the stream.

Settings: ``METRICS_REDIS_URL`` (the stream's Redis; it may have AOF, the pool's has none),
``METRICS_STREAM`` and ``METRICS_STREAM_MAXLEN``. A killed process loses at most one interval.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import threading
import time
from typing import Any

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from activity import redis_url
from pool_admin import bootstrap
from pool_admin.metrics.events import (
    MAX_ENTRY_BYTES,
    MAX_ENTRY_EVENTS,
    MalformedEvent,
    encode_event,
    entry_of,
)

logger = logging.getLogger(__name__)

MAX_QUEUED = 50_000
INTERVAL_S = 0.1
WARN_EVERY_S = 10.0
#: Most entries one pipeline sends (a bigger backlog goes in several).
SEND_BATCH = 100


class EventStream:
    """The process's queue of events and the thread that sends them (one per process, built by
    the composition root, pool_admin/bootstrap.py)."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        multiprocessing.util.Finalize(None, self.flush, exitpriority=10)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        # One flush at a time: a flush takes the unreported drops out before it tells Redis,
        # so a second flush running meanwhile (an exit's, a test's) would find none and return
        # before the first had told them; waiting for it makes every flush's return mean
        # "what was queued and dropped before it has been sent or told, or tried".
        self._flushing = threading.Lock()
        self._queue: list[bytes] = []
        self._dropped = 0
        self._sent = 0
        self._unwarned = 0
        self._unreported = 0
        self._warned_at = 0.0
        self._thread: threading.Thread | None = None
        self._client: redis.Redis | None = None
        self._url = ""

    def emit(self, kind: str, fields: dict[str, Any]) -> None:
        try:
            entry = encode_event(kind, int(time.time() * 1000), fields)
        except MalformedEvent as exc:
            logger.error("metrics event %s refused: %s", kind[:32], exc.reason)
            self._count_dropped(1)
            return
        with self._lock:
            if len(self._queue) >= MAX_QUEUED:
                self._dropped += 1
                self._unwarned += 1
                self._unreported += 1
                return
            self._queue.append(entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="metrics-stream", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(INTERVAL_S)
            self.flush()

    def flush(self) -> None:
        """Send what is queued now (the thread's job; tests and exits call it too)."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            queued, self._queue = self._queue, []
        entries = _entries(queued)
        for start in range(0, len(entries), SEND_BATCH):
            part = entries[start : start + SEND_BATCH]
            try:
                pipe = self._redis().pipeline(transaction=False)
                for _, entry in part:
                    pipe.xadd(
                        settings.METRICS_STREAM,
                        entry,  # type: ignore[arg-type]
                        maxlen=settings.METRICS_STREAM_MAXLEN,
                        approximate=True,
                    )
                pipe.execute()
                with self._lock:
                    self._sent += sum(n for n, _ in part)
            except redis.RedisError:
                self._count_dropped(sum(n for n, _ in part))
        self._report_drops()
        self._warn()

    def _report_drops(self) -> None:
        """Add the drops not reported yet to the deployment's total in the stream's Redis
        (GET /metrics reads it); when it does not answer, they wait for the next flush."""
        with self._lock:
            n, self._unreported = self._unreported, 0
        if not n:
            return
        try:
            self._redis().incrby(dropped_key(), n)
        except redis.RedisError:
            with self._lock:
                self._unreported += n

    def _redis(self) -> redis.Redis:
        url = settings.METRICS_REDIS_URL
        if self._client is None or self._url != url:  # a changed setting (tests) is followed
            # Short timeouts: the sending thread must not hang on a Redis that is gone. Never
            # retried: XADD * gives a new ID each time, so resending a pipeline whose reply was
            # lost would add its entries twice and the consumer count their events twice (a
            # lost reply counts them as dropped instead, which they may not be: never more).
            self._client = redis_url.connect(
                url, socket_timeout=2, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
            )
            self._url = url
        return self._client

    def _count_dropped(self, n: int) -> None:
        with self._lock:
            self._dropped += n
            self._unwarned += n
            self._unreported += n

    def _warn(self) -> None:
        with self._lock:
            if not self._unwarned or time.monotonic() - self._warned_at < WARN_EVERY_S:
                return
            n, self._unwarned, self._warned_at = self._unwarned, 0, time.monotonic()
            total = self._dropped
        logger.warning(
            "metrics: %d events dropped (%d in all since start): the stream's Redis "
            "did not take them, or too many waited",
            n,
            total,
        )

    def dropped(self) -> int:
        return self._dropped

    def queued(self) -> int:
        return len(self._queue)

    def sent(self) -> int:
        return self._sent


def _entries(queued: list[bytes]) -> list[tuple[int, dict[str, bytes]]]:
    """Encoded events grouped into stream entries within the entry's bounds: (events, entry)."""
    entries: list[tuple[int, dict[str, bytes]]] = []
    chunk: list[bytes] = []
    size = 0
    limit = MAX_ENTRY_BYTES - 64  # the field's name and the array's brackets
    for raw in queued:
        if chunk and (len(chunk) == MAX_ENTRY_EVENTS or size + len(raw) + 1 > limit):
            entries.append((len(chunk), entry_of(chunk)))
            chunk, size = [], 0
        chunk.append(raw)
        size += len(raw) + 1
    if chunk:
        entries.append((len(chunk), entry_of(chunk)))
    return entries


def dropped_key() -> str:
    """The deployment's count of dropped events, in the stream's Redis (a STRING, INCRBY)."""
    return f"{settings.METRICS_STREAM}:dropped"


def emit_event(kind: str, **fields: Any) -> None:
    """Queue one usage event (see the module's doc); returns at once, never raises."""
    bootstrap.event_stream().emit(kind, fields)


def flush_events() -> None:
    bootstrap.event_stream().flush()


def dropped_events() -> int:
    """Events this process could not put on the stream since it started."""
    return bootstrap.event_stream().dropped()


def sent_events() -> int:
    return bootstrap.event_stream().sent()


def queued_events() -> int:
    """Events waiting in this process for the sending thread."""
    return bootstrap.event_stream().queued()
