"""Keeping the usage stream's consumer group and its applied IDs bounded, and its losses told.

Run by every consumer every ``ConsumerOptions.claim_every_s`` (consumer.py), each step bounded:

* ``prune_applied``: applied IDs that can never be delivered again are deleted, at most
  ``PRUNE_BATCH`` rows a call. Never again means below the stream's first entry AND below
  every entry still pending in the group: trimming removes an entry from the stream, not from
  the pending list, so a pending entry trimmed meanwhile can still be handed out again (its
  content gone) and must still find its ID.
* ``forget_idle_consumers``: consumers with nothing pending and idle for ``FORGET_IDLE_MS``
  (a process restarted under a new name, as ``consume_metrics`` names itself by host and PID)
  leave the group, at most ``MAX_FORGET`` a call; otherwise every restart would stay forever.

Entries lost to the stream's trimming (PostgreSQL down for longer than
``METRICS_STREAM_MAXLEN`` entries take to arrive) are counted into a hash in the stream's Redis
that GET /metrics reads (``proxypool_usage_stream_entries_lost_total``): those trimmed before
the group read them by reading.py, pending ones trimmed before they were applied by the
consumer (``add_lost``).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.db import connection

from pool_admin.config.models import AppliedEntry

logger = logging.getLogger(__name__)

PRUNE_BATCH = 10_000
FORGET_IDLE_MS = 3_600_000
MAX_FORGET = 100
#: An ID above every ID a stream gives (the current time in ms is about 1.8e12).
_BEYOND = (10**15, 0)


def stream_id(raw: bytes | str) -> tuple[int, int]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


def lost_key(stream: str) -> str:
    """The stream's lost-entries hash (``total``; and ``r``, ``counted``: the last gap told)."""
    return f"{stream}:lost"


def prune_applied(client: redis.Redis, stream: str, group: str) -> int:
    """Delete applied IDs below the stream's first entry and the group's oldest pending one."""
    first: Any = client.xrange(stream, count=1)
    bound = stream_id(first[0][0]) if first else _BEYOND
    try:
        pending: Any = client.xpending(stream, group)
    except redis.ResponseError:  # no group (yet): nothing pending
        pending = {"pending": 0}
    if pending["pending"]:
        bound = min(bound, stream_id(pending["min"]))
    with connection.cursor() as cursor:
        table = AppliedEntry._meta.db_table  # a name of ours; every value is a parameter
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} "  # noqa: S608
            "WHERE stream = %s AND (ms, seq) < (%s, %s) LIMIT %s)",
            [stream, bound[0], bound[1], PRUNE_BATCH],
        )
        return int(cursor.rowcount)


def forget_idle_consumers(client: redis.Redis, stream: str, group: str, keep: str) -> int:
    """Remove consumers with nothing pending, idle for an hour (not ``keep``); how many."""
    consumers: Any = client.xinfo_consumers(stream, group)
    gone = 0
    for consumer in consumers:
        name = _text(consumer["name"])
        if gone == MAX_FORGET:
            break
        if name != keep and not consumer["pending"] and consumer["idle"] >= FORGET_IDLE_MS:
            # XGROUP DELCONSUMER drops the consumer's pending entries too: only asked for one
            # that had none and had not read for an hour (a live consumer reads every
            # ``block_ms``, or every backoff of at most 30 s), so none is dropped with it.
            client.xgroup_delconsumer(stream, group, name)
            gone += 1
    return gone


def add_lost(client: redis.Redis, stream: str, n: int) -> None:
    """Count ``n`` entries trimmed while pending, before they were applied."""
    client.hincrby(lost_key(stream), "total", n)


def lost_total(client: redis.Redis, stream: str) -> int:
    return int(client.hget(lost_key(stream), "total") or 0)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
