"""The usage stream's group consumer: batches into PostgreSQL aggregates, exactly once.

The loop (``../shared/research/operations.md`` §8; the Redis side of each step: group.py):

1. Which entries it reads next is its phase (phases.py, one transition function): on start
   and after any failure, its own pending entries, a batch at a time (``RECOVERING``), or one
   at a time once failures have lasted the claim time (``ONE_AT_A_TIME``), until none are
   left (whether such a read counts a delivery: phases.py too); then new ones (``READING``,
   blocking at most ``block_ms``, after counting what the stream trimmed before the group read
   it: lua/metrics/read_new.lua).
2. A batch's readable entries (each a batch of events, events.py) are applied in ONE
   transaction (applying.py): their IDs recorded under a unique constraint, the events of the
   entries not applied before and still this consumer's added, their refusals told. Commit.
3. Then the unreadable entries are dead-lettered and the batch acknowledged (``XACK``). A
   consumer killed between commit and acknowledgement leaves its entries pending; they are
   delivered again (to it, or to another by ``XAUTOCLAIM``) and the unique constraint makes
   them add nothing. Killed before the commit: nothing was written. Entries the stream trimmed
   while they were pending are retired to the unsettled set.
4. Unreadable entries, entries delivered more than ``max_deliveries`` times (checked on every
   read of pending entries: this consumer's own and claimed ones), and the single events of an
   applied entry that do not check or that PostgreSQL refuses whenever it is asked go to the
   dead-letter stream with their reason (and their entry's ID, and the event's index), then
   are acknowledged: they stop nothing.
5. Every ``claim_every_s``, entries pending longer than ``claim_idle_ms`` with any consumer (a
   dead one) are claimed and handled as in 2-4; then the bounded chores: unsettled entries
   settled (lost, unless applied before they were trimmed), applied IDs pruned (applying.py),
   idle consumers forgotten.

A failure of either store: the consumer keeps nothing of the batch in memory; it waits
(backoff, at most ``MAX_BACKOFF_S``) until both answer again and the group exists, and then
reads its own pending entries again. An entry that left the pending list is never applied
again by this consumer (the ownership check in applying.py), and the applied IDs of pending
and unsettled entries are never pruned: together, exactly once. What the stream trims before
it is applied is counted once (``proxypool_usage_stream_entries_lost_total``). The group gone
(the stream's Redis lost its data) is made again.

Bounds: a batch is at most ``batch`` entries (each at most ``events.MAX_ENTRY_BYTES`` and
``events.MAX_ENTRY_EVENTS``: 100 entries, at most 50,000 events, 25 MiB), a claim at most
10 reads of ``batch`` per call, a prune at most ``applying.PRUNE_BATCH`` rows, a settle at most
``group.SETTLE_BATCH`` entries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from django.db import DatabaseError, connection

from pool_admin.metrics.aggregates import apply_events
from pool_admin.metrics.applying import Decoded, applied_ids, apply_batch, prune_applied
from pool_admin.metrics.events import Event, MalformedEvent, Refused, decode_entry
from pool_admin.metrics.group import Entry, StreamGroup, hash_tag
from pool_admin.metrics.phases import Phase, PhaseEvent, State, transition

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

    def __post_init__(self) -> None:
        tag = hash_tag(self.stream)
        if tag is None or hash_tag(self.dead_letter) != tag:
            raise ValueError(
                "the dead-letter stream's key must carry the usage stream's hash tag (as "
                "'pp:{metrics}:dead' beside 'pp:{metrics}:events'): the stream's keys are one slot"
            )


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
        self.group = StreamGroup(client, options.stream, options.group, name)
        self._apply_events = apply
        self._fault = fault or (lambda point: None)
        #: Its phase, failure clock and delivery count: changed only by ``_on`` (phases.py).
        self.state = State()
        self._claimed_at = 0.0
        #: Entries applied, their events, entries already applied before (redeliveries), and
        #: entries or events dead-lettered: this process's.
        self.applied = self.events = self.duplicates = self.dead = 0

    def _on(self, event: PhaseEvent) -> State:
        now, idle_s = time.monotonic(), self.options.claim_idle_ms / 1000
        self.state = transition(self.state, event, now, idle_s)
        return self.state

    # ------------------------------------------------------------------ setup
    def ensure_group(self) -> None:
        self.group.ensure()

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: one step of its phase at a time; failures of either store
        waited out."""
        backoff = 0.5
        resume = True  # at start and after a failure: both stores answer, the group exists
        while not stop.is_set():
            try:
                if resume:
                    self._resume()
                    resume = False
                # Its own pending entries first: a claim would take them too once idle long
                # enough (one more delivery each), while reading them again touches them.
                due = time.monotonic() - self._claimed_at >= self.options.claim_every_s
                if due and self.state.phase is Phase.READING:
                    self.reclaim()
                    self.upkeep()
                self.step()
                self._on(PhaseEvent.SUCCEEDED)
                backoff = 0.5
            except (DatabaseError, redis.RedisError) as exc:
                self._on(PhaseEvent.FAILED)
                if isinstance(exc, redis.ResponseError) and "NOGROUP" in str(exc):
                    # The stream's Redis lost the group (a restart without persistence): what
                    # it held is gone, and what comes next must still be read.
                    logger.error(
                        "metrics consumer %s: the group %s is gone from the stream's "
                        "Redis; making it again",
                        self.name,
                        self.options.group,
                    )
                logger.warning(
                    "metrics consumer %s: %s; retrying in %.1f s",
                    self.name,
                    type(exc).__name__,
                    backoff,
                )
                connection.close()  # a broken connection is not reused
                resume = True
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _resume(self) -> None:
        """Both stores answer and the group exists (made again if the stream's Redis lost
        it), else the store's error: only then is anything read."""
        self.client.ping()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        self.ensure_group()

    def step(self) -> int:
        """One batch of its phase: new entries, or its own pending ones (their delivery counts
        checked); the entries applied for the first time."""
        o = self.options
        if self.state.phase is Phase.READING:
            return self.handle(self.group.read_new(o.batch, o.block_ms))
        first = self.state.counted_at is None
        state = self._on(PhaseEvent.OWN_DUE)
        single = state.phase is Phase.ONE_AT_A_TIME
        count = 1 if single else o.batch
        entries, deliveries = self.group.read_own(count, count_delivery=state.counting)
        if not entries:
            self._on(PhaseEvent.OWN_DONE)
            return 0
        self._on(PhaseEvent.OWN_READ)
        if state.counting and not first:
            failing_for = state.failing_for(time.monotonic())
            logger.error(
                "metrics consumer %s: its pending entries have failed for %.1f s: one at a time "
                "now, one more delivery counted (after %d they are dead-lettered)",
                self.name,
                failing_for,
                o.max_deliveries,
            )
        return self.handle(self._drop_overdelivered(entries, deliveries))

    def handle(self, entries: Sequence[Entry]) -> int:
        """Apply, dead-letter and acknowledge one batch; the entries applied for the first time."""
        if not entries:
            return 0
        o = self.options
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
        self._fault("read")
        ids = [raw_id for raw_id, _ in entries]
        result = apply_batch(
            o.stream,
            good,
            owned=lambda: self.group.owned(ids),
            apply_events=self._apply_events,
            tell=self._tell,
        )
        self._fault("committed")
        for raw_id, fields in entries:
            if raw_id in unreadable and fields:
                self._dead_letter(raw_id, fields, unreadable[raw_id])
        self.group.ack(
            [raw_id for raw_id in ids if raw_id not in result.not_owned and raw_id not in gone]
        )
        # Trimmed while pending: whether applied before is looked up by settle (upkeep).
        self.group.retire(gone)
        self.applied += len(result.fresh)
        self.events += result.events
        self.duplicates += result.duplicates
        return len(result.fresh)

    def _tell(self, raw_id: bytes, refused: Refused) -> None:
        self._dead_letter(raw_id, {b"event": refused.raw}, refused.reason, index=refused.index)

    def _dead_letter(
        self, raw_id: bytes, fields: dict[bytes, bytes], reason: str, index: int | None = None
    ) -> None:
        entry: dict[Any, Any] = {b"id": raw_id, b"reason": reason.encode()}
        if index is not None:  # one event of the entry (the others were applied)
            entry[b"index"] = str(index).encode()
        for name, value in fields.items():
            if name not in entry:
                entry[name] = value
        self.client.xadd(
            self.options.dead_letter,
            entry,
            maxlen=self.options.dead_letter_maxlen,
            approximate=True,
        )
        self.dead += 1
        logger.warning(
            "metrics consumer %s: %s %s dead-lettered: %s",
            self.name,
            "entry" if index is None else f"event {index} of entry",
            raw_id.decode(),
            reason,
        )

    # ------------------------------------------------------------------ dead consumers
    def reclaim(self) -> int:
        """Claim what dead consumers left pending and handle it; the entries claimed."""
        o = self.options
        self._claimed_at = time.monotonic()
        claimed = 0
        cursor: bytes | str = "0-0"
        for _ in range(10):  # at most 10 batches per call: the loop must keep reading too
            cursor, entries, deliveries = self.group.claim(o.claim_idle_ms, cursor, o.batch)
            if entries:
                claimed += len(entries)
                self.handle(self._drop_overdelivered(entries, deliveries))
            if cursor in (b"0-0", "0-0"):
                break
        return claimed

    def _drop_overdelivered(
        self, entries: list[Entry], deliveries: dict[bytes, int]
    ) -> list[Entry]:
        """Dead-letter (and acknowledge) the entries delivered more than ``max_deliveries``
        times (a poison entry must not be retried forever); the others, to handle."""
        o = self.options
        over = {
            raw_id
            for raw_id, fields in entries
            if fields and deliveries.get(raw_id, 0) > o.max_deliveries
        }
        if not over:
            return entries
        applied = applied_ids(o.stream, list(over))  # applied already: acknowledged, not told
        for raw_id, fields in entries:
            if raw_id in over and raw_id not in applied and fields:
                self._dead_letter(raw_id, fields, f"delivered {deliveries[raw_id]} times")
        self.group.ack(over)
        return [entry for entry in entries if entry[0] not in over]

    # ------------------------------------------------------------------ upkeep
    def upkeep(self) -> None:
        """The bounded chores, one round: trimmed entries settled (lost, or applied before),
        applied IDs pruned, idle consumers forgotten."""
        self.group.settle(lambda ids: applied_ids(self.options.stream, ids))
        prune_applied(self.options.stream, self.group.prune_bound())
        self.group.forget_idle()


def options_from_settings(**overrides: Any) -> ConsumerOptions:
    """The deployment's stream, group and dead-letter stream (settings.METRICS_*)."""
    from django.conf import settings

    return ConsumerOptions(
        stream=settings.METRICS_STREAM,
        group=settings.METRICS_GROUP,
        dead_letter=settings.METRICS_DEAD_LETTER,
        **overrides,
    )
