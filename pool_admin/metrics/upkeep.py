"""Keeping the usage stream's applied IDs bounded: run by every consumer every
``ConsumerOptions.claim_every_s`` (consumer.py), with the group's own chores (group.py:
settling trimmed entries, forgetting idle consumers).

``prune_applied`` deletes applied IDs that can never be needed again, at most ``PRUNE_BATCH``
rows a call: below the stream's first entry, AND below every entry still pending in the group
(trimming removes an entry from the stream, not from the pending list, so a pending entry
trimmed meanwhile can be read again, its content gone, and must still be found applied), AND
below every unsettled entry (a trimmed entry whose fate is still to be looked up).
"""

from __future__ import annotations

from django.db import connection

from pool_admin.config.models import AppliedEntry
from pool_admin.metrics.group import StreamGroup

PRUNE_BATCH = 10_000


def prune_applied(group: StreamGroup) -> int:
    """Delete applied IDs below ``group.prune_bound()``; how many."""
    ms, seq = group.prune_bound()
    with connection.cursor() as cursor:
        table = AppliedEntry._meta.db_table  # a name of ours; every value is a parameter
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} "  # noqa: S608
            "WHERE stream = %s AND (ms, seq) < (%s, %s) LIMIT %s)",
            [group.stream, ms, seq, PRUNE_BATCH],
        )
        return int(cursor.rowcount)
