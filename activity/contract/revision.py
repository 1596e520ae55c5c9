"""Contract: a worker's holdings revision (``ControlStore.worker_revision``,
``WorkerAssignments.revision``; docs/activity-pool.md "Holdings revision").

The gateway control plane answers an unchanged snapshot without rebuilding it: the revision
must go up with every change to what the worker's snapshot says of its proxies, and stay put
for everything else, so the answer is neither stale nor rebuilt for nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolHarness
from activity.contract.runtime import _World
from activity.errors import InvalidRequest, ScanBudgetExhausted
from activity.holdings import read_holdings
from activity.types import ProxyState, SnapshotRef

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


def revision(h: PoolHarness, worker: str = "w1") -> int:
    """The worker's revision, checked to be the one worker_assignments reads with nothing in
    between (the two reads agree)."""
    cheap = h.pool.worker_revision(worker).revision
    assert h.pool.worker_assignments(worker, h.options.max_report_entries).revision == cheap
    return cheap


class TestHoldingsRevision:
    def test_every_change_to_an_assignment_counts(self, make_pool):
        """Holdings revision: assign, renew, begin_drain and expire each count; the release of
        a drained proxy, already out of the snapshot, does not."""
        h = make_pool()
        w = _World(h, "p1", "p2")  # two assigns, a snapshot issued and ACKed
        seen = [revision(h)]
        h.stock("p3")
        p3 = h.pool.assign(h.now, "p3", "w1", MIN)
        seen.append(revision(h))
        h.pool.renew(h.now, "p3", "w1", p3.epoch, 2 * MIN)
        seen.append(revision(h))
        h.pool.begin_drain("p1", "w1", w.assignments["p1"].epoch)
        seen.append(revision(h))
        w.snapshot()  # excludes p1, so the drain may end
        status = h.pool.acknowledge_drain("p1", "w1", w.assignments["p1"].epoch, 0, 0)
        assert status.value == "released"
        assert revision(h) == seen[-1]
        assert h.pool.expire(h.now + 3 * MIN, 10)  # p2 (5 min) is left, p3 (2 min) lapses
        seen.append(revision(h))
        assert seen == sorted(set(seen)), seen  # strictly increasing
        assert seen[0] > 0  # the first assigns counted too

    def test_a_release_by_a_report_does_not_count(self, make_pool):
        """Holdings revision: write_report releasing a drained proxy changes no snapshot (the
        proxy left it when its drain began), so the worker's next poll stays a 304."""
        h = make_pool()
        w = _World(h, "p1", "p2")
        h.pool.begin_drain("p1", "w1", w.assignments["p1"].epoch)
        w.snapshot()
        before = revision(h)
        assert h.pool.write_report(w.report(w.entry("p2", 1))).released == ("p1",)
        assert revision(h) == before

    def test_an_expiry_of_a_drained_proxy_does_not_count(self, make_pool):
        """Holdings revision: a drained proxy's lease lapsing and its assignment expiring are
        out of every snapshot; only the held one's expiry counts."""
        h = make_pool()
        w = _World(h, "p1", "p2")
        h.pool.begin_drain("p1", "w1", w.assignments["p1"].epoch)
        before = revision(h)
        h.upsert([h.proxy("p1", ttl=2 * MIN)])  # cuts the drained proxy's lease
        assert revision(h) == before
        expired = h.pool.expire(h.now + 3 * MIN, 10)
        assert [a.proxy_id for a in expired] == ["p1"]
        assert revision(h) == before

    def test_a_provider_refresh_of_a_held_proxy_counts(self, make_pool):
        """Holdings revision: the snapshot describes a held proxy by its record; an upsert
        rewriting it (labels, lifetimes, credentials may change) counts, whatever it says."""
        h = make_pool()
        _World(h, "p1")
        before = revision(h)
        h.upsert([h.proxy("p1", ttl=20 * MIN, region="de")])
        assert revision(h) > before
        again = revision(h)
        h.upsert([h.proxy("p1", ttl=20 * MIN, region="de")])  # the same listing again
        assert revision(h) > again

    def test_a_refresh_that_cuts_the_lease_counts(self, make_pool):
        """Holdings revision: a refresh moving usable_until before a held proxy's lease cuts
        the lease."""
        h = make_pool()
        w = _World(h, "p1")
        before = revision(h)
        h.upsert([h.proxy("p1", ttl=2 * MIN)])
        lease = h.pool.get("p1")
        assert lease is not None
        assert lease.lease_expires_at < w.assignments["p1"].lease_expires_at
        assert revision(h) > before

    def test_a_held_proxy_removed_at_its_hard_expiry_counts(self, make_pool):
        """Holdings revision: a record removed with its assignment (sweep) ends the assignment."""
        h = make_pool()
        _World(h, "p1")
        before = revision(h)
        h.advance(11 * MIN)  # past the proxy's hard expiry
        assert h.pool.sweep(10).expired == 1
        assert revision(h) > before
        assert h.pool.worker_assignments("w1", 10).assignments == ()

    def test_what_leaves_the_holdings_alone_does_not_count(self, make_pool):
        """Holdings revision: another worker's changes, reads, health updates and the session's
        own calls (open, heartbeat, issue, ACK, a report releasing nothing) do not count."""
        h = make_pool()
        w = _World(h, "p1")
        h.stock("q1")
        before = revision(h)
        other = h.pool.assign(h.now, "q1", "w2", MIN)
        h.pool.renew(h.now, "q1", "w2", other.epoch, 2 * MIN)
        h.pool.begin_drain("q1", "w2", other.epoch)
        h.pool.worker_assignments("w1", 10)
        h.pool.worker_revision("w1")
        h.pool.drain_tickets("w1", 10)
        h.pool.get("p1")
        h.pool.read_runtime("w1")
        h.pool.upstream_inventory("u1")
        h.mark(["p1"], ProxyState.SUSPECT)  # the manager's call to drain; no snapshot field
        h.pool.open_session("w1", "s1", 10 * MIN)  # heartbeat
        w.snapshot()  # issue and ACK
        assert h.pool.write_report(w.report(w.entry("p1", 1))).released == ()
        assert revision(h) == before
        assert revision(h, "w2") > 0

    def test_a_refresh_of_a_draining_proxy_does_not_count(self, make_pool):
        """Holdings revision: a draining proxy is out of the snapshot; its record's rewrite,
        leaving the lease alone, changes nothing the snapshot says."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.begin_drain("p1", "w1", w.assignments["p1"].epoch)
        before = revision(h)
        h.upsert([h.proxy("p1", ttl=20 * MIN)])
        assert revision(h) == before

    def test_a_new_session_keeps_the_revision(self, make_pool):
        """Holdings revision: it counts the holdings, which outlive a session: a new session
        generation neither resets nor moves it."""
        h = make_pool()
        _World(h, "p1")
        before = revision(h)
        h.pool.open_session("w1", "s2", MIN)
        assert revision(h) == before


class TestWorkerRevisionSession:
    def test_no_session_is_none(self, make_pool):
        """worker_revision: a worker that never opened a session has none, and revision 0
        until something is counted."""
        h = make_pool()
        assert h.pool.worker_revision("w1").session is None
        assert h.pool.worker_revision("w1").revision == 0
        h.stock("p1")
        h.pool.assign(h.now, "p1", "w1", MIN)
        assert h.pool.worker_revision("w1").session is None
        assert h.pool.worker_revision("w1").revision > 0

    def test_the_session_is_what_the_session_calls_left(self, make_pool):
        """worker_revision: the live session, with the snapshot issued and the one ACKed."""
        h = make_pool()
        h.stock("p1")
        opened = h.pool.open_session("w1", "s1", 10 * MIN)
        assert h.pool.worker_revision("w1").session == opened
        a = h.pool.assign(h.now, "p1", "w1", MIN)
        ref = SnapshotRef(1, a.epoch, "sum-1")
        h.pool.issue_snapshot("w1", "s1", ref, ["p1"])
        issued = h.pool.worker_revision("w1").session
        assert issued is not None
        assert (issued.session_id, issued.issued, issued.acked) == ("s1", ref, None)
        acked = h.pool.acknowledge_snapshot("w1", "s1", 1)
        assert h.pool.worker_revision("w1").session == acked
        assert acked.acked == ref
        replaced = h.pool.open_session("w1", "s2", 10 * MIN)
        assert h.pool.worker_revision("w1").session == replaced
        assert replaced.generation > opened.generation

    def test_an_expired_session_is_none(self, make_pool):
        """worker_revision: the session's TTL runs on the store's clock; expired is none."""
        h = make_pool()
        h.pool.open_session("w1", "s1", timedelta(milliseconds=300))
        assert h.pool.worker_revision("w1").session is not None
        h.advance_server(timedelta(milliseconds=600))
        assert h.pool.worker_revision("w1").session is None

    @pytest.mark.parametrize("worker", ["", "x" * 1000, 7])
    def test_a_bad_worker_id_is_refused(self, make_pool, worker):
        """worker_revision: the worker ID is checked as every other call checks it."""
        h = make_pool()
        with pytest.raises(InvalidRequest):
            h.pool.worker_revision(worker)


class TestHoldingsPages:
    def test_pages_in_lease_order_make_the_whole(self, make_pool):
        """worker_assignments(offset): pages of the lease order; complete on the last one."""
        h = make_pool()
        _World(h, *[f"p{i}" for i in range(5)])
        whole = h.pool.worker_assignments("w1", 10)
        pages = [h.pool.worker_assignments("w1", 2, offset) for offset in (0, 2, 4)]
        assert [p.complete for p in pages] == [False, False, True]
        assert [a for p in pages for a in p.assignments] == list(whole.assignments)
        assert {k: v for p in pages for k, v in p.held.items()} == dict(whole.held)
        assert {(p.revision, p.epoch) for p in pages} == {(whole.revision, whole.epoch)}
        past = h.pool.worker_assignments("w1", 2, 9)
        assert (past.assignments, past.complete) == ((), True)

    @pytest.mark.parametrize("offset", [-1, True, "1", 10_001])
    def test_a_bad_offset_is_refused(self, make_pool, offset):
        h = make_pool()
        with pytest.raises(InvalidRequest):
            h.pool.worker_assignments("w1", 2, offset)


class TestPagedHoldingsRead:
    """activity/holdings.py over both pools: pages read as one, or read again."""

    def test_pages_under_one_revision_are_one_read(self, make_pool):
        h = make_pool()
        _World(h, *[f"p{i}" for i in range(7)])
        whole = h.pool.worker_assignments("w1", 100)
        paged = read_holdings(h.pool, "w1", 100, page=3)
        assert paged == whole
        capped = read_holdings(h.pool, "w1", 5, page=3)
        assert len(capped.assignments) == 5 and not capped.complete

    def test_a_change_between_pages_starts_the_read_again(self, make_pool):
        h = make_pool()
        w = _World(h, *[f"p{i}" for i in range(4)])
        h.stock("p9")
        changes = iter([lambda: h.pool.assign(h.now, "p9", "w1", MIN)])

        class ChangingBetweenPages:
            def worker_assignments(self, worker_id, limit, offset=0):
                if offset:
                    next(changes, lambda: None)()  # once: an assign between two pages
                return h.pool.worker_assignments(worker_id, limit, offset)

        read = read_holdings(ChangingBetweenPages(), "w1", 100, page=2)  # type: ignore[arg-type]
        assert sorted(a.proxy_id for a in read.assignments) == sorted([*w.assignments, "p9"])
        assert read == h.pool.worker_assignments("w1", 100)

    def test_holdings_that_never_hold_still_are_temporarily_unavailable(self, make_pool):
        h = make_pool()
        w = _World(h, "p1", "p2", "p3")

        class AlwaysChanging:
            def worker_assignments(self, worker_id, limit, offset=0):
                if offset:
                    a = w.assignments["p1"]
                    h.pool.renew(h.now, "p1", "w1", a.epoch, 5 * MIN)  # moves the revision
                return h.pool.worker_assignments(worker_id, limit, offset)

        with pytest.raises(ScanBudgetExhausted):
            read_holdings(AlwaysChanging(), "w1", 100, page=2)  # type: ignore[arg-type]
