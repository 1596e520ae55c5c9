"""The usage stream's group consumer: batches into PostgreSQL aggregates, exactly once.

The loop (``../shared/research/operations.md`` §8):

1. On start, and after any failure, this consumer's own pending entries first (``XREADGROUP``
   with ID ``0``) until none are left; then new ones (``>``), blocking at most ``block_ms``.
2. A batch's readable entries (each a batch of events, events.py) are applied in ONE
   transaction: their IDs are inserted into ``AppliedEntry`` (``ON CONFLICT DO NOTHING
   RETURNING``), and only the events of the entries that came back (not applied before) are
   added to the aggregates. Commit.
3. Then ``XACK``. A consumer killed between commit and acknowledgement leaves its entries
   pending; they are delivered again (to it, or to another by ``XAUTOCLAIM``) and the unique
   constraint makes them add nothing. Killed before the commit: nothing was written.
4. Unreadable entries, entries delivered more than ``max_deliveries`` times, and the single
   events of an applied entry that do not check, or that PostgreSQL refuses whenever it is
   asked (a constraint, a sum past ``bigint``: reason ``apply failed: <error class>``), go to
   the dead-letter stream with their reason (and their entry's ID, and the event's index),
   then are acknowledged: they stop nothing.
   The delivery count is checked on every read of pending entries, this consumer's own (a
   process restarted under its old name that dies on an entry again) and claimed ones.
5. Every ``claim_every_s``, entries pending longer than ``claim_idle_ms`` with any consumer (a
   dead one) are claimed with ``XAUTOCLAIM`` and handled as in 2-4; then upkeep.py's bounded
   chores: applied IDs pruned, idle consumers forgotten, entries trimmed unread counted.

PostgreSQL down: the consumer keeps the batch it holds and tries it again (backoff, at most
``MAX_BACKOFF_S``): nothing is lost while the stream keeps what arrives meanwhile (what it
trims unread is counted, upkeep.py). A batch committed whose acknowledgement failed is not
applied again on the retry (``_Batch.fresh``): only its dead letters not yet written and its
acknowledgement are. The group gone (the stream's Redis lost its data) is made again.

Bounds: a batch is at most ``batch`` entries (each at most ``events.MAX_ENTRY_BYTES`` and
``events.MAX_ENTRY_EVENTS``: 100 entries, at most 50,000 events, 25 MiB), a claim at most
10 reads of ``batch`` per call, a prune at most ``upkeep.PRUNE_BATCH`` rows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from django.db import DatabaseError, DataError, IntegrityError, connection, transaction

from pool_admin.config.models import AppliedEntry
from pool_admin.metrics import upkeep
from pool_admin.metrics.aggregates import apply_events
from pool_admin.metrics.events import (
    DecodedEntry,
    Event,
    MalformedEvent,
    Refused,
    decode_entry,
    encoded,
)

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
#: Where a test may stop the consumer dead (``fault``): after the read, after the commit.
FAULT_POINTS = ("read", "committed")


@dataclass(frozen=True)
class ConsumerOptions:
    stream: str
    group: str
    dead_letter: str
    batch: int = 100
    block_ms: int = 1_000
    claim_idle_ms: int = 60_000
    claim_every_s: float = 5.0
    max_deliveries: int = 5
    #: Most entries the dead-letter stream keeps (approximately; the oldest go first).
    dead_letter_maxlen: int = 100_000


Entry = tuple[bytes, dict[bytes, bytes] | None]
Decoded = tuple[bytes, DecodedEntry]
_id = upkeep.stream_id


@dataclass
class _Batch:
    """A batch read and not finished yet: kept across failures, so a retry neither reads it
    again (one more delivery each time) nor applies it twice once committed."""

    entries: Sequence[Entry]
    #: The entries applied for the first time, once the transaction committed.
    fresh: list[Decoded] | None = None
    #: Dead letters of this batch written so far (a retry writes only the others).
    told: int = 0


class Consumer:
    def __init__(
        self,
        client: redis.Redis,
        name: str,
        options: ConsumerOptions,
        *,
        apply: Callable[[Sequence[Event]], None] = apply_events,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        self.client, self.name, self.options = client, name, options
        self._apply_events = apply
        self._fault = fault or (lambda point: None)
        self._own_pending = True
        self._group_ready = False
        self._unfinished: _Batch | None = None
        self._claimed_at = 0.0
        #: Entries applied, their events, entries already applied before (redeliveries), and
        #: entries or events dead-lettered: this process's.
        self.applied = self.events = self.duplicates = self.dead = 0

    # ------------------------------------------------------------------ setup
    def ensure_group(self) -> None:
        """The group, reading the stream from its start (events produced before it existed
        are counted too)."""
        try:
            self.client.xgroup_create(self.options.stream, self.options.group, id="0",
                                      mkstream=True)  # fmt: skip
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: read, apply, acknowledge; wait out failures of either store."""
        backoff = 0.5
        while not stop.is_set():
            try:
                if not self._group_ready:
                    self.ensure_group()
                if time.monotonic() - self._claimed_at >= self.options.claim_every_s:
                    self.reclaim()
                    self.upkeep()
                self.step()
                backoff = 0.5
            except (DatabaseError, redis.RedisError) as exc:
                if isinstance(exc, redis.ResponseError) and "NOGROUP" in str(exc):
                    # The stream's Redis lost the group (a restart without persistence): what
                    # it held is gone, and what comes next must still be read.
                    logger.error("metrics consumer %s: the group %s is gone from the stream's "
                                 "Redis; making it again", self.name,
                                 self.options.group)  # fmt: skip
                    self._group_ready = False
                if self._unfinished is None:  # a claim or a prune failed: its entries are ours
                    self._own_pending = True
                logger.warning("metrics consumer %s: %s; retrying in %.1f s", self.name,
                               type(exc).__name__, backoff)  # fmt: skip
                connection.close()  # a broken connection is not reused
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    def step(self) -> int:
        """One batch: the batch whose handling failed last time, as it was read; else this
        consumer's pending entries while it has any (their delivery counts checked); else new
        ones. The entries applied for the first time."""
        batch = self._unfinished
        if batch is None:
            o = self.options
            start = "0" if self._own_pending else ">"
            block = None if self._own_pending else o.block_ms
            reply: Any = self.client.xreadgroup(o.group, self.name, {o.stream: start},
                                                count=o.batch, block=block)  # fmt: skip
            entries = reply[0][1] if reply else []
            if self._own_pending:
                if not entries:
                    self._own_pending = False
                else:
                    entries = self._drop_overdelivered(entries)
            batch = _Batch(entries)
        self._unfinished = batch
        fresh = self._finish(batch)
        self._unfinished = None
        return fresh

    def handle(self, entries: Sequence[Entry]) -> int:
        """Apply, dead-letter and acknowledge one batch; the entries applied for the first time."""
        return self._finish(_Batch(entries))

    def _finish(self, batch: _Batch) -> int:
        entries = batch.entries
        if not entries:
            return 0
        good: list[Decoded] = []
        unreadable: dict[bytes, str] = {}
        gone: list[bytes] = []
        for raw_id, fields in entries:
            if not fields:  # trimmed while pending (redis-py gives {}): nothing to apply
                gone.append(raw_id)
                continue
            try:
                good.append((raw_id, decode_entry(fields)))
            except MalformedEvent as exc:
                unreadable[raw_id] = exc.reason
        if batch.fresh is None:
            self._fault("read")
            batch.fresh = self._apply(good) if good else []
            self.applied += len(batch.fresh)
            self.events += sum(len(decoded.events) for _, decoded in batch.fresh)
            self.duplicates += len(good) - len(batch.fresh)
        self._fault("committed")
        # In the stream's order; an entry applied before had its refusals told then.
        refusals = {raw_id: decoded.refused for raw_id, decoded in batch.fresh}
        letters: list[tuple[bytes, dict[bytes, bytes], str, int | None]] = []
        for raw_id, fields in entries:
            if raw_id in unreadable and fields:
                letters.append((raw_id, fields, unreadable[raw_id], None))
            for refused in refusals.get(raw_id, ()):
                letters.append((raw_id, {b"event": refused.raw}, refused.reason, refused.index))
        for letter in letters[batch.told :]:
            self._dead_letter(*letter)
            batch.told += 1
        self.client.xack(self.options.stream, self.options.group, *[e[0] for e in entries])
        if gone:
            upkeep.add_lost(self.client, self.options.stream, len(gone))
            logger.error("metrics consumer %s: %d pending entries were trimmed from the stream "
                         "before they were applied: their events are not in the aggregates",
                         self.name, len(gone))  # fmt: skip
        return len(batch.fresh)

    def _apply(self, good: Sequence[Decoded]) -> list[Decoded]:
        """In one transaction: record the entries' IDs, add the events of those not recorded
        before; the entries applied now.

        A batch PostgreSQL refuses as such (``DataError``, ``IntegrityError``: a sum past
        ``bigint``, say) would be refused on every retry and stop the stream for good: its
        entries are then applied one by one, and the events of an entry refused alone are
        dead-lettered alone (``_apply_alone``). A failure of the server itself
        (``OperationalError``) propagates: the batch is retried as it is, later."""
        try:
            with transaction.atomic():
                fresh = self._record(good)
                events = [event for _, decoded in fresh for event in decoded.events]
                if events:
                    self._apply_events(events)
            return fresh
        except (DataError, IntegrityError) as exc:
            logger.warning("metrics consumer %s: PostgreSQL refused a batch (%s); applying its "
                           "entries one by one", self.name, type(exc).__name__)  # fmt: skip
        return [applied for item in good for applied in self._apply_alone(item)]

    def _record(self, good: Sequence[Decoded]) -> list[Decoded]:
        """Insert the entries' IDs (inside the caller's transaction); those not there before."""
        ids = [_id(raw_id) for raw_id, _ in good]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {AppliedEntry._meta.db_table} (stream, ms, seq) "
                "SELECT %s, unnest(%s::bigint[]), unnest(%s::bigint[]) "
                "ON CONFLICT (stream, ms, seq) DO NOTHING RETURNING ms, seq",
                [self.options.stream, [ms for ms, _ in ids], [seq for _, seq in ids]],
            )
            new = {(int(ms), int(seq)) for ms, seq in cursor.fetchall()}
        return [item for item, key in zip(good, ids, strict=True) if key in new]

    def _apply_alone(self, item: Decoded) -> list[Decoded]:
        """One entry in its own transaction; if PostgreSQL refuses its events together, each
        in a savepoint of its own, the refused ones told as refusals (at most
        ``events.MAX_ENTRY_EVENTS`` savepoints, on this rare path only)."""
        raw_id, decoded = item
        with transaction.atomic():
            if not self._record([item]):
                return []
            try:
                with transaction.atomic():
                    if decoded.events:
                        self._apply_events(decoded.events)
                return [item]
            except (DataError, IntegrityError):
                pass
            kept = DecodedEntry(refused=list(decoded.refused))
            for index, event in zip(decoded.positions, decoded.events, strict=True):
                try:
                    with transaction.atomic():
                        self._apply_events([event])
                except (DataError, IntegrityError) as exc:
                    reason = f"apply failed: {type(exc).__name__}"
                    kept.refused.append(Refused(index, reason, encoded(event)))
                else:
                    kept.events.append(event)
                    kept.positions.append(index)
            kept.refused.sort(key=lambda refused: refused.index)
        return [(raw_id, kept)]

    def _dead_letter(
        self, raw_id: bytes, fields: dict[bytes, bytes], reason: str, index: int | None = None
    ) -> None:
        entry: dict[Any, Any] = {b"id": raw_id, b"reason": reason.encode()}
        if index is not None:  # one event of the entry (the others were applied)
            entry[b"index"] = str(index).encode()
        for name, value in fields.items():
            if name not in entry:
                entry[name] = value
        self.client.xadd(self.options.dead_letter, entry, maxlen=self.options.dead_letter_maxlen,
                         approximate=True)  # fmt: skip
        self.dead += 1
        logger.warning("metrics consumer %s: %s %s dead-lettered: %s", self.name,
                       "entry" if index is None else f"event {index} of entry", raw_id.decode(),
                       reason)  # fmt: skip

    # ------------------------------------------------------------------ dead consumers
    def reclaim(self) -> int:
        """Claim what dead consumers left pending and handle it; the entries claimed."""
        o = self.options
        self._claimed_at = time.monotonic()
        claimed = 0
        cursor = "0-0"
        for _ in range(10):  # at most 10 batches per call: the loop must keep reading too
            reply = self.client.xautoclaim(o.stream, o.group, self.name, o.claim_idle_ms,
                                           start_id=cursor, count=o.batch)  # fmt: skip
            cursor, entries = reply[0], reply[1]
            if len(reply) > 2 and reply[2]:  # pending entries trimmed: XAUTOCLAIM dropped them
                upkeep.add_lost(self.client, o.stream, len(reply[2]))
                logger.error("metrics consumer %s: %d pending entries were trimmed from the "
                             "stream before they were applied: their events are not in the "
                             "aggregates", self.name, len(reply[2]))  # fmt: skip
            if entries:
                claimed += len(entries)
                self.handle(self._drop_overdelivered(entries))
            if cursor in (b"0-0", "0-0"):
                break
        return claimed

    def _drop_overdelivered(self, entries: list[Entry]) -> list[Entry]:
        """Dead-letter (and acknowledge) the entries delivered more than ``max_deliveries``
        times (a poison entry must not be retried forever); the others, to handle."""
        o = self.options
        ids = [raw_id for raw_id, _ in entries]
        pending = self.client.xpending_range(
            o.stream, o.group, min=ids[0], max=ids[-1], count=len(ids) * 2, consumername=self.name
        )
        deliveries = {p["message_id"]: int(p["times_delivered"]) for p in pending}
        keep: list[Entry] = []
        for raw_id, fields in entries:
            times = deliveries.get(raw_id, 0)
            if times > o.max_deliveries and fields:
                self._dead_letter(raw_id, fields, f"delivered {times} times")
                self.client.xack(o.stream, o.group, raw_id)
            else:
                keep.append((raw_id, fields))
        return keep

    # ------------------------------------------------------------------ upkeep
    def upkeep(self) -> None:
        """upkeep.py's bounded chores, one round."""
        o = self.options
        upkeep.prune_applied(self.client, o.stream, o.group)
        upkeep.forget_idle_consumers(self.client, o.stream, o.group, keep=self.name)
        upkeep.count_lost(self.client, o.stream, o.group)


def options_from_settings(**overrides: Any) -> ConsumerOptions:
    """The deployment's stream, group and dead-letter stream (settings.METRICS_*)."""
    from django.conf import settings

    return ConsumerOptions(
        stream=settings.METRICS_STREAM,
        group=settings.METRICS_GROUP,
        dead_letter=settings.METRICS_DEAD_LETTER,
        **overrides,
    )
