"""The outcome aggregates: one column per outcome, and a bounded retention."""

from datetime import UTC, datetime, timedelta

import pytest

from activity import Outcome
from pool_admin.config import quality
from pool_admin.config.models import UpstreamQuality
from pool_admin.config.quality import minute_of, prune_quality

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_every_outcome_has_its_column():
    """The consumer names columns after outcomes: a new outcome needs a column (migration)."""
    columns = {f.name for f in UpstreamQuality._meta.get_fields()}
    assert {o.value for o in Outcome} <= columns


def test_prune_deletes_only_rows_past_retention_in_bounded_batches(monkeypatch):
    monkeypatch.setattr(quality, "PRUNE_BATCH", 2)
    for days in (100, 99, 95, 89, 1):
        UpstreamQuality.objects.create(
            upstream="acme-us", minute=minute_of(NOW - timedelta(days=days)), ok=1
        )
    retention = timedelta(days=90)
    assert prune_quality(retention, NOW) == (2, True)
    assert prune_quality(retention, NOW) == (1, False)
    assert prune_quality(retention, NOW) == (0, False)
    kept = sorted((NOW - r.minute).days for r in UpstreamQuality.objects.all())
    assert kept == [1, 89]
