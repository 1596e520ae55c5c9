"""Contract: every size and time cap on input, at the cap and one past it.

A cap is inclusive (the largest batch, the longest text, the furthest time ahead is accepted);
one more is a typed error that changes nothing. Each cap is set small here so both sides of its
edge are cheap to reach.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import InvalidBatch, InvalidRequest
from activity.types import (
    Outcome,
    OutcomeReport,
    PoolOptions,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)

MS = timedelta(milliseconds=1)
SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


class TestInputCaps:
    def test_an_upsert_of_exactly_max_upsert_batch(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(max_upsert_batch=3))
        assert h.upsert([h.proxy(f"p{i}") for i in range(3)]).inserted == 3
        with pytest.raises(InvalidBatch):
            h.upsert([h.proxy(f"q{i}") for i in range(4)])
        assert h.pool.inventory("u1") == 3

    def test_a_report_and_a_snapshot_of_exactly_max_report_entries(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(max_report_entries=2))
        h.stock("a", "b", "c")
        h.pool.open_session("w1", "s1", MIN)
        with pytest.raises(InvalidRequest):
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, 0, "c"), ["a", "b", "c"])
        h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, 0, "c"), ["a", "b"])
        h.pool.acknowledge_snapshot("w1", "s1", 1)
        idle = [RuntimeEntry(pid, 0, 0, 0) for pid in ("a", "b", "c")]
        with pytest.raises(InvalidBatch):
            h.pool.write_report(RuntimeReport("w1", "s1", 1, 1, 0, tuple(idle)))
        assert not h.pool.write_report(RuntimeReport("w1", "s1", 1, 1, 0, tuple(idle[:2]))).replayed
        view = h.pool.read_runtime("w1")
        assert view is not None and [e.proxy_id for e in view.entries] == ["a", "b"]

    def test_a_quarantine_query_of_exactly_max_quarantine_batch(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(max_quarantine_batch=2))
        assert h.pool.quarantine_of(["a", "b"], h.now) == {}
        with pytest.raises(InvalidBatch):
            h.pool.quarantine_of(["a", "b", "c"], h.now)

    def test_text_of_exactly_max_text(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(max_text=16))
        h.stock("p1", "p2")
        assert ids(h.take(1, client="c" * 16)) == ["p1"]
        with pytest.raises(InvalidRequest):
            h.take(1, client="c" * 17)
        assert h.pool.inventory("u1") == 1

    def test_a_lease_of_exactly_max_lease_ttl(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(max_lease_ttl=timedelta(hours=1)))
        h.stock("a", "b", ttl=timedelta(hours=2))  # usable_until does not cut the lease
        with pytest.raises(InvalidRequest):
            h.pool.assign(h.now, "b", "w1", timedelta(hours=1) + MS)
        a = h.pool.assign(h.now, "a", "w1", timedelta(hours=1))
        assert a.lease_expires_at == h.now + timedelta(hours=1)

    def test_an_outcome_up_to_the_clock_skew_ahead(self, make_pool: PoolFactory):
        h = make_pool(options=PoolOptions(max_clock_skew=10 * SEC))
        h.stock("p1", "p2")
        assert len(ids(h.take(2))) == 2
        with pytest.raises(InvalidRequest):
            h.pool.report_outcome(OutcomeReport("c1", "p1", Outcome.OK, h.now + 10 * SEC + MS))
        assert not h.pool.report_outcome(
            OutcomeReport("c1", "p1", Outcome.OK, h.now + 10 * SEC)
        ).replayed

    def test_a_ban_whose_quarantine_ends_now_quarantines_nothing(self, make_pool: PoolFactory):
        """Quarantine: reported_at + quarantine must lie after now to quarantine anything."""
        h = make_pool()
        h.stock("p1", "p2")
        assert len(ids(h.take(2))) == 2
        late = OutcomeReport("c1", "p1", Outcome.BANNED, h.now - MIN, quarantine=MIN)
        assert h.pool.report_outcome(late).quarantined_until is None
        just = OutcomeReport("c1", "p2", Outcome.BANNED, h.now - MIN + MS, quarantine=MIN)
        assert h.pool.report_outcome(just).quarantined_until == h.now + MS
