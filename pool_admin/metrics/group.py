"""The usage stream's consumer group, the Redis side: what one consumer reads, claims,
acknowledges and retires, each step that must not be split one function of the library in
lua/metrics/ (loaded and called by activity/lua_functions.py, as the pool's and the
scheduler's are).

A caller sees entries as ``(ID, fields or None)`` (None: trimmed from the stream while
pending) and never a key name or a script's reply. The keys beside the stream: ``:lost``
(a HASH, ``total``: entries trimmed before a consumer applied them, GET /metrics) and
``:unsettled`` (a ZSET of trimmed pending entries whose fate the consumer has yet to look up:
applied before they were trimmed, or lost). The applied IDs of unsettled entries are kept
(``prune_bound``), so the look-up is always right. The stream's key carries a hash tag
(``<prefix>:{metrics}:events``), which the keys named after it share: one Cluster slot.

Bounds: every read at most ``count`` entries; a settle at most ``SETTLE_BATCH``; a forget at
most ``MAX_FORGET`` consumers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any

import redis

from activity.lua_functions import LUA_DIR, FunctionLibrary, Scripts

logger = logging.getLogger(__name__)

Entry = tuple[bytes, dict[bytes, bytes] | None]
StreamId = tuple[int, int]

SETTLE_BATCH = 1_000
FORGET_IDLE_MS = 3_600_000
MAX_FORGET = 100

OPERATIONS = ("read_new", "read_own", "claim", "retire", "settle", "forget")
# allow-oom: a stream Redis at its maxmemory must still let the consumer read, acknowledge and
# count what it lost (as EVAL scripts without flags did; a function without it is refused).
_WRAPPER = (
    "redis.register_function{{function_name='{name}_{suffix}', flags={{'allow-oom'}},\n"
    "  callback=function(KEYS, ARGV)\n"
    "    bind(KEYS[1])\n"
    "    return (function()\n{body}\n    end)()\n"
    "  end}}\n"
)
METRICS_LIBRARY = FunctionLibrary.of_folder("pp_metrics", LUA_DIR / "metrics", OPERATIONS, _WRAPPER)


def stream_id(raw: bytes | str) -> StreamId:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


def hash_tag(key: str) -> str | None:
    """The part of ``key`` Redis Cluster hashes when it has one (between the first ``{`` and
    the first ``}`` after it, not empty), else None."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else None


def _fields(flat: Any) -> dict[bytes, bytes] | None:
    if not flat:  # false (trimmed) or an empty list
        return None
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _with_deliveries(rows: Any) -> tuple[list[Entry], dict[bytes, int]]:
    """A script's ``{id, fields or false, deliveries}`` rows as entries and their counts."""
    entries = [(raw_id, _fields(flat)) for raw_id, flat, _ in rows]
    return entries, {raw_id: int(times) for raw_id, _, times in rows}


class StreamGroup:
    def __init__(self, client: redis.Redis, stream: str, group: str, consumer: str) -> None:
        if hash_tag(stream) is None:
            raise ValueError(
                f"the usage stream's key {stream!r} has no hash tag (as in "
                "'pp:{metrics}:events'): the keys named after it would not share its Cluster slot"
            )
        self.client, self.stream, self.group, self.consumer = client, stream, group, consumer
        self._unsettled = f"{stream}:unsettled"
        self._scripts = Scripts(client, stream, METRICS_LIBRARY)

    # ------------------------------------------------------------------ the group
    def ensure(self) -> None:
        """The group, reading the stream from its start (events produced before it existed
        count too), its read counter exact from the start (read_new.lua relies on it)."""
        try:
            self.client.xgroup_create(
                self.stream, self.group, id="0", mkstream=True, entries_read=0
            )
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # ------------------------------------------------------------------ reading
    def read_new(self, count: int, block_ms: int) -> list[Entry]:
        """Up to ``count`` new entries; waits at most ``block_ms`` when there are none. What
        the stream trimmed before the group read it is counted first (read_new.lua)."""
        entries, last = self._read_new(count)
        if entries:
            return entries
        # A plain XREAD after the stream's last ID only wakes this up (it delivers nothing):
        # an XREADGROUP here could cross a gap trimmed meanwhile without counting it.
        woken: Any = self.client.xread({self.stream: last}, count=1, block=block_ms)
        return self._read_new(count)[0] if woken else []

    def _read_new(self, count: int) -> tuple[list[Entry], bytes]:
        lost, raw, last = self._scripts.call_raw("read_new", self.group, self.consumer, count)
        if lost:
            logger.error(
                "metrics stream %s: %s entries were trimmed before any consumer read "
                "them (the consumers were behind by more than METRICS_STREAM_MAXLEN "
                "entries): their events are not in the aggregates",
                self.stream,
                "some" if lost < 0 else lost,
            )
        return [(raw_id, _fields(flat)) for raw_id, flat in raw], last

    def read_own(self, count: int, *, count_delivery: bool) -> tuple[list[Entry], dict[bytes, int]]:
        """Up to ``count`` of this consumer's pending entries, oldest first, and how often each
        was delivered; a delivery more only when ``count_delivery`` (read_own.lua: why)."""
        rows = self._scripts.call_raw(
            "read_own", self.group, self.consumer, count, int(count_delivery)
        )
        return _with_deliveries(rows)

    def claim(
        self, min_idle_ms: int, start: bytes | str, count: int
    ) -> tuple[bytes, list[Entry], dict[bytes, int]]:
        """Entries pending longer than ``min_idle_ms`` with any consumer, from ``start``, and
        how often each was delivered (this claim included); the cursor to go on from (``0-0``:
        the end) first. Trimmed ones go to the unsettled set."""
        cursor, rows = self._scripts.call_raw(
            "claim", self.group, self.consumer, min_idle_ms, start, count
        )
        return (cursor, *_with_deliveries(rows))

    def deliveries(self, ids: Sequence[bytes]) -> dict[bytes, int]:
        """How often each of these entries (pending to this consumer) was delivered."""
        low, high = min(ids, key=stream_id), max(ids, key=stream_id)
        pending: Any = self.client.xpending_range(
            self.stream,
            self.group,
            min=low,
            max=high,
            count=len(ids) * 2,
            consumername=self.consumer,
        )
        return {p["message_id"]: int(p["times_delivered"]) for p in pending}

    def owned(self, ids: Sequence[bytes]) -> set[bytes]:
        """Which of these entries are pending to this consumer now. Another of its pending
        entries inside their range may take a place of the reply: an entry then missing counts
        as not its own, which only leaves it pending for later."""
        if not ids:
            return set()
        wanted = set(ids)
        return {i for i in self.deliveries(ids) if i in wanted}

    # ------------------------------------------------------------------ finishing
    def ack(self, ids: Collection[bytes]) -> None:
        if ids:
            self.client.xack(self.stream, self.group, *ids)

    def retire(self, ids: Sequence[bytes]) -> int:
        """Pending entries the stream trimmed leave the pending list for the unsettled set."""
        if not ids:
            return 0
        return int(self._scripts.call_raw("retire", self.group, *ids))

    def settle(self, applied: Callable[[Sequence[bytes]], Collection[bytes]]) -> int:
        """Up to ``SETTLE_BATCH`` unsettled entries leave the set, counted as lost unless
        ``applied`` (the consumer's look-up of their applied IDs) names them; the lost."""
        ids: Any = self.client.zrange(self._unsettled, 0, SETTLE_BATCH - 1)
        if not ids:
            return 0
        done = set(applied(ids))
        args = [x for raw_id in ids for x in (raw_id, "0" if raw_id in done else "1")]
        lost = int(self._scripts.call_raw("settle", *args))
        if lost:
            logger.error(
                "metrics stream %s: %d pending entries were trimmed from the stream "
                "before they were applied: their events are not in the aggregates",
                self.stream,
                lost,
            )
        return lost

    # ------------------------------------------------------------------ upkeep
    def prune_bound(self) -> StreamId:
        """No applied ID at or above this can be needed: the stream's first entry, the
        group's oldest pending entry and the oldest unsettled one (its ms) bound it."""
        first: Any = self.client.xrange(self.stream, count=1)
        bound = stream_id(first[0][0]) if first else (10**15, 0)  # past any ID
        pending: Any = self.client.xpending(self.stream, self.group)
        if pending["pending"]:
            bound = min(bound, stream_id(pending["min"]))
        oldest: Any = self.client.zrange(self._unsettled, 0, 0, withscores=True)
        if oldest:
            bound = min(bound, (int(oldest[0][1]), 0))
        return bound

    def forget_idle(self, idle_ms: int | None = None) -> int:
        """Consumers (not this one) with nothing pending and idle ``idle_ms`` leave the group,
        at most ``MAX_FORGET``; how many (forget.lua)."""
        idle = FORGET_IDLE_MS if idle_ms is None else idle_ms
        return int(self._scripts.call_raw("forget", self.group, self.consumer, idle, MAX_FORGET))


def _lost_key(stream: str) -> str:
    return f"{stream}:lost"


def lost_total(client: redis.Redis, stream: str) -> int:
    """The stream's entries lost to its trimming (GET /metrics), without a consumer."""
    return int(client.hget(_lost_key(stream), "total") or 0)
