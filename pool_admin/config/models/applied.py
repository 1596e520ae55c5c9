"""What the usage stream's consumer records of the entries it applied (pool_admin/metrics/).

An entry's ID is recorded in the same transaction as the aggregates it added to, under a
unique constraint: a redelivered entry (its consumer died after the commit, before the
acknowledgement) is found there and adds nothing. Rows below the stream's first entry, the
group's oldest pending entry and its oldest unsettled one can never be needed again and are
pruned in batches (``pool_admin.metrics.applying.prune_applied``).
"""

from __future__ import annotations

from django.db import models


class AppliedEntry(models.Model):
    """One stream entry applied to the aggregates: its stream and ID (``<ms>-<seq>``)."""

    stream = models.CharField(max_length=128)
    ms = models.BigIntegerField()
    seq = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stream", "ms", "seq"], name="applied_once")]

    def __str__(self) -> str:
        return f"{self.stream} {self.ms}-{self.seq}"
