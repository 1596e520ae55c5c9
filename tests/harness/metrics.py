"""The usage stream in tests: each test on a stream of its own, and a drain that sends what is
queued and applies it (an in-process consumer, the same code as ``manage.py consume_metrics``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import redis
from django.conf import settings
from django.db import connection

from pool_admin.metrics.consumer import Consumer, options_from_settings
from pool_admin.metrics.events import encode_event, entry_of
from pool_admin.metrics.phases import Phase
from pool_admin.metrics.stream import flush_events

T = TypeVar("T")


def entry(*events: tuple[str, int, dict[str, object]]) -> dict[str, bytes]:
    """A stream entry holding these (kind, at_ms, fields) events, as a producer sends it."""
    return entry_of([encode_event(kind, at_ms, fields) for kind, at_ms, fields in events])


def isolate_stream(settings_fixture: object, prefix: str) -> None:
    """Point the producers and the consumer at this test's own stream and dead-letter stream."""
    settings_fixture.METRICS_STREAM = f"{prefix}:{{metrics}}:events"  # type: ignore[attr-defined]
    settings_fixture.METRICS_DEAD_LETTER = f"{prefix}:{{metrics}}:dead"  # type: ignore[attr-defined]


def drain_metrics() -> int:
    """Send the queued events and apply every entry of the stream; the entries applied."""
    flush_events()
    client = redis.Redis.from_url(settings.METRICS_REDIS_URL, socket_timeout=10)
    try:
        consumer = Consumer(client, "test", options_from_settings(block_ms=1))
        consumer.ensure_group()
        applied = 0
        while True:
            applied += consumer.step()
            if (
                consumer.state.phase is Phase.READING
                and not client.xinfo_groups(settings.METRICS_STREAM)[0]["lag"]
            ):
                return applied
    finally:
        client.close()


@contextmanager
def consumer_running(consumer: Consumer) -> Iterator[None]:
    """``consumer.run`` in a thread of its own for the block, stopped (and its database
    connection closed: the test database is dropped after) at its end."""
    stop = threading.Event()

    def run() -> None:
        try:
            consumer.run(stop)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def wait_until(condition: Callable[[], T], seconds: float = 10, what: str = "the condition") -> T:
    """``condition()``'s first truthy answer, asked every 50 ms for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"not reached in {seconds} s: {what}"
        time.sleep(0.05)
    return found
