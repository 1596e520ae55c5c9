"""Contract: worker sessions, snapshots and runtime reports (ADR-005 "Worker 运行态与容量汇总")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness
from activity.errors import (
    InvalidBatch,
    InvalidRequest,
    ReportRejected,
    SessionExpired,
    SessionFenced,
    SnapshotRejected,
)
from activity.types import (
    Assignment,
    PoolOptions,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


class _World:
    """One worker with a session, some assignments and an ACKed snapshot of them."""

    def __init__(self, h: PoolHarness, *proxy_ids: str, worker: str = "w1", session: str = "s1"):
        self.h, self.worker, self.session = h, worker, session
        h.stock(*proxy_ids)
        h.pool.open_session(worker, session, 10 * MIN)
        self.assignments: dict[str, Assignment] = {
            pid: h.pool.assign(h.now, pid, worker, 5 * MIN) for pid in proxy_ids
        }
        self.ref = self.snapshot()
        self.sequence = 0

    def snapshot(self) -> SnapshotRef:
        view = self.h.pool.worker_assignments(self.worker, self.h.options.max_report_entries)
        ref = SnapshotRef(self.h.serial(), view.epoch, f"sum-{self.h.serial()}")
        self.h.pool.issue_snapshot(
            self.worker, self.session, ref, [a.proxy_id for a in view.assignments]
        )
        self.h.pool.acknowledge_snapshot(self.worker, self.session, ref.version)
        self.ref = ref
        return ref

    def entry(self, pid: str, active: int = 0, reserved: int = 0, **kw) -> RuntimeEntry:
        return RuntimeEntry(pid, self.assignments[pid].epoch, active, reserved, **kw)

    def report(self, *entries: RuntimeEntry, sequence: int | None = None, **kw) -> RuntimeReport:
        if sequence is None:
            self.sequence += 1
            sequence = self.sequence
        fields = {
            "worker_id": self.worker,
            "session_id": self.session,
            "sequence": sequence,
            "snapshot_version": self.ref.version,
            "epoch": self.ref.epoch,
            "entries": tuple(entries),
            **kw,
        }
        return RuntimeReport(**fields)

    def slots(self) -> int:
        return self.h.pool.upstream_inventory("u1").available_slots


class TestWorkerRuntime:
    def test_a_report_is_read_back(self, make_pool: PoolFactory):
        """Worker 运行态 rule 2/6: an accepted report is the worker's runtime view."""
        h = make_pool()
        w = _World(h, "p1", "p2")
        assert h.pool.read_runtime("w1") is None
        result = h.pool.write_report(w.report(w.entry("p1", 2, 1)))
        assert not result.replayed
        view = h.pool.read_runtime("w1")
        assert view is not None
        assert (view.sequence, view.snapshot_version, view.epoch) == (1, w.ref.version, w.ref.epoch)
        assert view.entries == (w.entry("p1", 2, 1),)

    def test_a_new_session_fences_the_old_one(self, make_pool: PoolFactory):
        """Worker 运行态 rule 1: session replacement isolates the old instance's writes."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.write_report(w.report(w.entry("p1", 1)))
        h.pool.open_session("w1", "s2", MIN)
        assert h.pool.read_runtime("w1") is None  # the old counts are not trusted any more
        with pytest.raises(SessionFenced):
            h.pool.write_report(w.report(w.entry("p1", 1)))
        with pytest.raises(SessionFenced):
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(99, 0, "x"), [])
        with pytest.raises(SessionFenced):
            h.pool.acknowledge_snapshot("w1", "s1", w.ref.version)

    def test_reopening_the_same_session_is_a_heartbeat(self, make_pool: PoolFactory):
        """Worker 运行态 rule 1: the current instance renewing keeps its state."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.write_report(w.report(w.entry("p1", 1)))
        session = h.pool.open_session("w1", "s1", 10 * MIN)
        assert session.acked == w.ref
        assert h.pool.read_runtime("w1") is not None

    def test_an_expired_session_refuses_writes(self, make_pool: PoolFactory):
        """Worker 运行态 rule 5: session TTL runs on the store's clock."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.open_session("w1", "s1", 200 * timedelta(milliseconds=1))
        h.advance_server(400 * timedelta(milliseconds=1))
        with pytest.raises(SessionExpired):
            h.pool.write_report(w.report())

    def test_reports_carry_exactly_the_acked_snapshot(self, make_pool: PoolFactory):
        """Worker 运行态 rule 2: version and epoch equal the ACK; an epoch ahead is refused."""
        h = make_pool()
        w = _World(h, "p1")
        for bad in (
            {"epoch": w.ref.epoch + 1},
            {"snapshot_version": w.ref.version + 1},
            {"epoch": w.ref.epoch - 1},
        ):
            with pytest.raises(ReportRejected) as err:
                h.pool.write_report(w.report(sequence=1, **bad))
            assert err.value.reason == "snapshot_mismatch"
        h.pool.write_report(w.report(sequence=1))

    def test_no_report_before_the_first_ack(self, make_pool: PoolFactory):
        """Worker 运行态 rule 2: a session that ACKed nothing cannot report counts."""
        h = make_pool()
        h.stock("p1")
        h.pool.open_session("w1", "s1", MIN)
        with pytest.raises(ReportRejected) as err:
            h.pool.write_report(RuntimeReport("w1", "s1", 1, 0, 0))
        assert err.value.reason == "snapshot_mismatch"

    def test_sequence_rules(self, make_pool: PoolFactory):
        """Worker 运行态 rule 3: strictly increasing; same body replays; anything else refused."""
        h = make_pool()
        w = _World(h, "p1")
        first = w.report(w.entry("p1", 1), sequence=1)
        h.pool.write_report(first)
        assert h.pool.write_report(first).replayed
        cases = {
            "sequence_conflict": w.report(w.entry("p1", 2), sequence=1),
            "sequence_gap": w.report(w.entry("p1", 2), sequence=3),
        }
        for reason, report in cases.items():
            with pytest.raises(ReportRejected) as err:
                h.pool.write_report(report)
            assert err.value.reason == reason
        h.pool.write_report(w.report(w.entry("p1", 2), sequence=2))
        with pytest.raises(ReportRejected) as err:
            h.pool.write_report(first)
        assert err.value.reason == "sequence_regression"
        assert h.pool.read_runtime("w1").entries == (w.entry("p1", 2),)

    def test_non_zero_counts_must_match_owner_worker_and_epoch(self, make_pool: PoolFactory):
        """Worker 运行态 rule 4: counts for a proxy the worker does not own are refused."""
        h = make_pool()
        w = _World(h, "p1")
        h.stock("free")
        other = h.pool.assign(h.now, "free", "w2", MIN)
        bad = [
            RuntimeEntry("free", other.epoch, 1, 0),
            RuntimeEntry("p1", w.assignments["p1"].epoch + 7, 0, 1),
            RuntimeEntry("ghost", 1, 1, 0),
        ]
        for entry in bad:
            with pytest.raises(ReportRejected) as err:
                h.pool.write_report(w.report(entry, sequence=1))
            assert err.value.reason == "ownership_mismatch"
            assert err.value.proxy_ids == (entry.proxy_id,)
        # Zero counts say nothing about ownership and are accepted.
        h.pool.write_report(w.report(RuntimeEntry("ghost", 1, 0, 0), sequence=1))

    def test_an_expired_report_fails_capacity_closed(self, make_pool: PoolFactory):
        """Worker 运行态 rule 5: report TTL on the store's clock; expired -> zero slots."""
        h = make_pool(options=PoolOptions(report_ttl=timedelta(milliseconds=300)))
        w = _World(h, "p1")
        h.pool.write_report(w.report(w.entry("p1", 1)))
        assert w.slots() == 3
        h.advance_server(timedelta(milliseconds=600))
        assert h.pool.read_runtime("w1") is None
        assert w.slots() == 0

    def test_an_empty_report_clears_and_missing_counts_zero(self, make_pool: PoolFactory):
        """Worker 运行态 rule 6: sparse reports; an empty one clears every old count."""
        h = make_pool()
        w = _World(h, "p1", "p2")
        h.pool.write_report(w.report(w.entry("p1", 3, 1)))
        assert w.slots() == 0 + 4  # p1: 4-3-1, p2: missing -> 4
        h.pool.write_report(w.report())
        assert h.pool.read_runtime("w1").entries == ()
        assert w.slots() == 8

    def test_a_zero_report_releases_a_drained_proxy_behind_an_acked_snapshot(self, make_pool):
        """Worker 运行态: the runtime replacement checks ACK, ticket barrier and zero counts."""
        h = make_pool()
        w = _World(h, "p1", "p2")
        epoch = w.assignments["p1"].epoch
        h.pool.begin_drain("p1", "w1", epoch)
        busy = w.report(w.entry("p1", 1, draining=True))
        assert h.pool.write_report(busy).released == ()
        w.snapshot()  # excludes p1 and is ACKed; the report must now carry the new ref
        assert h.pool.write_report(w.report(w.entry("p1", 1, draining=True))).released == ()
        assert h.pool.get("p1") is not None
        assert h.pool.write_report(w.report(w.entry("p2", 1))).released == ("p1",)
        assert h.pool.get("p1") is None

    def test_a_zero_report_before_the_excluding_ack_releases_nothing(self, make_pool):
        """Worker 运行态: zero counts at a snapshot that still routes through it prove nothing."""
        h = make_pool()
        w = _World(h, "p1", "p2")
        h.pool.begin_drain("p1", "w1", w.assignments["p1"].epoch)
        assert h.pool.write_report(w.report()).released == ()
        assert h.pool.get("p1") is not None

    def test_a_report_from_before_an_assignment_says_nothing_about_it(self, make_pool):
        """Slots: an assignment newer than the worker's report has unknown runtime -> zero."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.write_report(w.report())
        assert w.slots() == 4
        h.stock("p2")
        h.pool.assign(h.now, "p2", "w1", MIN)
        assert w.slots() == 4  # p2: the report predates it, so it offers nothing yet

    def test_a_lapsed_lease_offers_nothing(self, make_pool: PoolFactory):
        """Slots: an assignment past its lease (not yet expired by the manager) fails closed."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.write_report(w.report())
        h.advance(5 * MIN)
        assert w.slots() == 0

    def test_an_expired_session_makes_its_runtime_unknown(self, make_pool: PoolFactory):
        """Worker 运行态 rule 5: no live session, no runtime."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.write_report(w.report())
        h.pool.open_session("w1", "s1", timedelta(milliseconds=300))
        h.advance_server(timedelta(milliseconds=600))
        assert h.pool.read_runtime("w1") is None
        assert w.slots() == 0

    def test_sweep_forgets_expired_sessions(self, make_pool: PoolFactory):
        """短 TTL 清理: sessions and reports leave the store when they expire."""
        h = make_pool()
        w = _World(h, "p1")
        h.pool.write_report(w.report())
        h.pool.open_session("w1", "s1", timedelta(milliseconds=300))
        h.pool.open_session("w2", "s9", timedelta(milliseconds=300))
        h.advance_server(timedelta(milliseconds=600))
        result = h.pool.sweep(1)
        assert (result.sessions, result.more) == (1, True)
        assert h.pool.sweep(10).sessions == 1
        with pytest.raises(SessionFenced):
            h.pool.write_report(w.report())

    def test_snapshot_sequence(self, make_pool: PoolFactory):
        """ControlStore: issued versions increase, epochs never run ahead, ACK only the last."""
        h = make_pool()
        w = _World(h, "p1")
        epoch = w.ref.epoch
        with pytest.raises(SnapshotRejected) as err:
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(w.ref.version + 9, epoch + 1, "x"), [])
        assert err.value.reason == "epoch_ahead"
        with pytest.raises(SnapshotRejected) as err:
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(w.ref.version, epoch, "other"), [])
        assert err.value.reason == "version_order"
        assert h.pool.issue_snapshot("w1", "s1", w.ref, ["p1"]) == 0  # same issue: no-op
        with pytest.raises(SnapshotRejected) as err:
            h.pool.acknowledge_snapshot("w1", "s1", w.ref.version + 1)
        assert err.value.reason == "not_issued"
        # Versions, epochs and sequences stay where every store keeps them exactly.
        with pytest.raises(InvalidRequest):
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(10**15, epoch, "big"), [])

    def test_epoch_isolation(self, make_pool: PoolFactory):
        """Worker 运行态 rule 4: counts from an older assignment say nothing about a new one."""
        h = make_pool()
        w = _World(h, "p1")
        old = w.assignments["p1"]
        h.pool.write_report(w.report(w.entry("p1", 4)))
        assert w.slots() == 0
        h.pool.expire(h.now + 6 * MIN, 10)
        h.pool.assign(h.now, "p1", "w1", MIN)  # a new assignment, a new epoch
        assert w.slots() == 0  # the report speaks of epoch `old`, not this one
        with pytest.raises(ReportRejected):
            h.pool.write_report(w.report(RuntimeEntry("p1", old.epoch, 1, 0)))


class TestRuntimeInput:
    @pytest.mark.parametrize(
        "fields",
        [
            {"sequence": 0},
            {"sequence": -1},
            {"epoch": -1},
            {"entries": (RuntimeEntry("p1", 1, -1, 0),)},
            {"entries": (RuntimeEntry("p1", 1, 0, 0), RuntimeEntry("p1", 1, 0, 0))},
            {"entries": [RuntimeEntry("p1", 1, 0, 0)]},
            {"worker_id": ""},
            {"entries": tuple(RuntimeEntry(f"p{i}", 1, 0, 0) for i in range(6))},
            {"entries": (("p1", 1, 0, 0),)},
        ],
        ids=[
            "zero sequence",
            "negative sequence",
            "negative epoch",
            "negative active",
            "duplicate proxy",
            "entries as a list",
            "empty worker",
            "oversize",
            "entry as a tuple",
        ],
    )
    def test_bad_reports(self, make_pool: PoolFactory, fields):
        """Worker 运行态: malformed reports are refused whole and change nothing."""
        h = make_pool(options=PoolOptions(max_report_entries=5))
        w = _World(h, "p1")
        h.pool.write_report(w.report(w.entry("p1", 1)))
        before = h.pool.read_runtime("w1")
        fields = {
            "worker_id": "w1",
            "session_id": "s1",
            "sequence": 2,
            "snapshot_version": w.ref.version,
            "epoch": w.ref.epoch,
            **fields,
        }
        with pytest.raises(InvalidBatch):
            h.pool.write_report(RuntimeReport(**fields))
        assert h.pool.read_runtime("w1") == before
        h.pool.write_report(w.report(w.entry("p1", 2)))  # sequence 2 is still free
