"""One batch of stream entries into PostgreSQL, in one transaction, exactly once.

``apply_batch`` inserts the entries' IDs into ``AppliedEntry`` (``ON CONFLICT DO NOTHING
RETURNING``: the ones not applied before), then asks whether the entries are still this
consumer's (``owned``: pending to it in the group). The question comes after the insert on
purpose: the inserted rows are locked until the commit, so a consumer that claims the entries
later blocks on them and finds them applied, and one that claimed them earlier (this consumer
stalled for longer than the claim's idle time) has them: their rows are taken out again and
they are left to it. Only then are the events added, and each refusal told
(``tell``: the dead-letter stream) before the commit: a crash after the commit never loses a
refusal; one before it tells the refusal again on the next delivery (at least once; a dead
letter's entry ID and index name it).

PostgreSQL refusing the batch as such (``DataError``, ``IntegrityError``: a total past
``bigint``, say) would refuse it on every delivery and hold the stream for good: the events are
then added entry by entry, and an entry refused alone event by event, each in a savepoint, so
only the events PostgreSQL refuses are set aside (reason ``apply failed: <error class>``). A
failure of the server itself (``OperationalError``) rolls everything back and propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from django.db import DataError, IntegrityError, connection, transaction

from pool_admin.config.models import AppliedEntry
from pool_admin.metrics.events import DecodedEntry, Event, Refused, encoded
from pool_admin.metrics.group import StreamId, stream_id

logger = logging.getLogger(__name__)

#: The applied IDs' table (a name of ours: every value in the statements is a parameter).
TABLE = AppliedEntry._meta.db_table
#: Most applied IDs one prune deletes.
PRUNE_BATCH = 10_000

Decoded = tuple[bytes, DecodedEntry]
#: (entry ID, the refused event): told to the dead-letter stream.
Tell = Callable[[bytes, Refused], None]


@dataclass
class Applied:
    #: Entries applied now, for the first time.
    fresh: list[Decoded] = field(default_factory=list)
    #: Entries applied before (a redelivery): nothing added.
    duplicates: int = 0
    #: Entries another consumer holds now: left to it, not acknowledged here.
    not_owned: set[bytes] = field(default_factory=set)
    #: Events added.
    events: int = 0


def apply_batch(
    stream: str,
    good: Sequence[Decoded],
    *,
    owned: Callable[[], Collection[bytes]],
    apply_events: Callable[[Sequence[Event]], None],
    tell: Tell,
) -> Applied:
    """Apply ``good`` (decoded entries, in stream order) once; see the module's doc."""
    result = Applied()
    with transaction.atomic():
        new = _record(stream, good)
        mine = set(owned())
        result.not_owned = {raw_id for raw_id, _ in good if raw_id not in mine}
        gave_back = [item for item in new if item[0] in result.not_owned]
        if gave_back:
            _forget(stream, [raw_id for raw_id, _ in gave_back])
        result.fresh = [item for item in new if item[0] in mine]
        result.duplicates = sum(1 for raw_id, _ in good if raw_id in mine) - len(result.fresh)
        for raw_id, decoded in result.fresh:
            for refused in decoded.refused:
                tell(raw_id, refused)
        events = [event for _, decoded in result.fresh for event in decoded.events]
        result.events = len(events)
        if events:
            _add(result, events, apply_events, tell)
    return result


def _add(
    result: Applied,
    events: list[Event],
    apply_events: Callable[[Sequence[Event]], None],
    tell: Tell,
) -> None:
    try:
        with transaction.atomic():
            apply_events(events)
        return
    except (DataError, IntegrityError) as exc:
        logger.warning(
            "metrics: PostgreSQL refused a batch (%s); applying its entries one by one",
            type(exc).__name__,
        )
    for raw_id, decoded in result.fresh:
        if not decoded.events:
            continue
        try:
            with transaction.atomic():
                apply_events(decoded.events)
            continue
        except (DataError, IntegrityError):
            pass
        # At most events.MAX_ENTRY_EVENTS savepoints, on this rare path only.
        for index, event in zip(decoded.positions, decoded.events, strict=True):
            try:
                with transaction.atomic():
                    apply_events([event])
            except (DataError, IntegrityError) as exc:
                tell(raw_id, Refused(index, f"apply failed: {type(exc).__name__}", encoded(event)))
                result.events -= 1


def _id_arrays(raw_ids: Iterable[bytes]) -> tuple[list[int], list[int]]:
    """Entry IDs as the two arrays the statements below unnest (ms, seq)."""
    ids = [stream_id(raw_id) for raw_id in raw_ids]
    return [ms for ms, _ in ids], [seq for _, seq in ids]


def _record(stream: str, good: Sequence[Decoded]) -> list[Decoded]:
    """Insert the entries' IDs; the entries whose ID was not there before."""
    if not good:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (stream, ms, seq) "
            "SELECT %s, unnest(%s::bigint[]), unnest(%s::bigint[]) "
            "ON CONFLICT (stream, ms, seq) DO NOTHING RETURNING ms, seq",
            [stream, *_id_arrays(raw_id for raw_id, _ in good)],
        )
        new = {(int(ms), int(seq)) for ms, seq in cursor.fetchall()}
    return [item for item in good if stream_id(item[0]) in new]


def _forget(stream: str, raw_ids: list[bytes]) -> None:
    """Take out IDs this transaction inserted (entries another consumer holds now)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {TABLE} WHERE stream = %s "  # noqa: S608
            "AND (ms, seq) IN (SELECT unnest(%s::bigint[]), unnest(%s::bigint[]))",
            [stream, *_id_arrays(raw_ids)],
        )


def applied_ids(stream: str, raw_ids: Sequence[bytes]) -> set[bytes]:
    """Which of these entries were applied, waiting for a transaction applying one of them
    now: an INSERT of their IDs, rolled back, blocks on another's uncommitted row (a SELECT
    would not see it, and would call an entry lost that is being applied)."""
    if not raw_ids:
        return set()
    with transaction.atomic():
        free = {raw_id for raw_id, _ in _record(stream, [(r, DecodedEntry()) for r in raw_ids])}
        transaction.set_rollback(True)
    return set(raw_ids) - free


def prune_applied(stream: str, bound: StreamId) -> int:
    """Delete applied IDs below ``bound``, at most ``PRUNE_BATCH``; how many. The caller's
    bound (``StreamGroup.prune_bound``) is below the stream's first entry, AND below every
    entry still pending in the group (trimming removes an entry from the stream, not from the
    pending list, so a pending entry trimmed meanwhile can be read again, its content gone, and
    must still be found applied), AND below every unsettled entry."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} "  # noqa: S608
            "WHERE stream = %s AND (ms, seq) < (%s, %s) LIMIT %s)",
            [stream, bound[0], bound[1], PRUNE_BATCH],
        )
        return int(cursor.rowcount)
