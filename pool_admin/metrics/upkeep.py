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
* ``count_lost``: entries the stream trimmed before the group read them (PostgreSQL down for
  longer than ``METRICS_STREAM_MAXLEN`` entries take to arrive), counted once into a hash in
  the stream's Redis that GET /metrics reads (``proxypool_usage_stream_entries_lost_total``).
  Pending entries trimmed before they were applied are added by the consumer (``add_lost``).
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


def count_lost(client: redis.Redis, stream: str, group: str) -> int:
    """Count the entries trimmed before the group read them, once; the ones counted now.

    With the group behind the stream's first entry (its last delivered ID below it), every
    entry it has not read that is no longer in the stream was trimmed unread: the stream's
    ``entries-added`` less its length less the group's ``entries-read``. While the group stays
    there the number only grows; the hash keeps how many of that gap (named by
    ``entries-read``) are counted, so each consumer that looks adds only what is new.
    """
    info: Any = client.xinfo_stream(stream)
    group_info = next((g for g in client.xinfo_groups(stream) if _text(g["name"]) == group), None)
    if group_info is None:
        return 0
    first = info.get("first-entry")
    delivered = stream_id(group_info["last-delivered-id"])
    if first is not None and delivered >= stream_id(first[0]):
        return 0
    read = group_info.get("entries-read")
    if read is None:  # Redis tells none for a group that has read nothing yet
        if delivered != (0, 0):
            return 0  # or when it cannot tell (entries deleted): then this cannot be told
        read = 0
    read = int(read)
    lost = int(info["entries-added"]) - int(info["length"]) - read
    if lost <= 0:
        return 0
    key = lost_key(stream)
    with client.pipeline() as pipe:
        try:
            pipe.watch(key)  # type: ignore[no-untyped-call]  # untyped in redis-py
            gap, counted = pipe.hmget(key, "r", "counted")
            already = int(counted or 0) if gap is not None and int(gap) == read else 0
            if lost <= already:
                return 0
            pipe.multi()
            pipe.hset(key, mapping={"r": read, "counted": lost})
            pipe.hincrby(key, "total", lost - already)
            pipe.execute()
        except redis.WatchError:
            return 0  # another consumer counted it meanwhile; the next look adds what is new
    logger.error("metrics stream %s: %d entries were trimmed before any consumer read them "
                 "(the stream holds METRICS_STREAM_MAXLEN entries; the consumers were behind "
                 "by more): their events are not in the aggregates", stream,
                 lost - already)  # fmt: skip
    return lost - already


def add_lost(client: redis.Redis, stream: str, n: int) -> None:
    """Count ``n`` entries trimmed while pending, before they were applied."""
    client.hincrby(lost_key(stream), "total", n)


def lost_total(client: redis.Redis, stream: str) -> int:
    return int(client.hget(lost_key(stream), "total") or 0)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
