"""Sessions, snapshots, reports and slots: a gateway worker's session, the snapshots issued to
it, the runtime counts it reports, and the free slots read from them (ports SessionWriter,
ControlStore, ReportWriter, RuntimeReader, SlotsReader)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from activity._checks import MAX_COUNTER, count, duration_ms, token
from activity._time import from_ms, span_ms
from activity._validation.common import limit as check_limit
from activity._validation.common import text
from activity._validation.sessions import prepare_report, snapshot_ref
from activity._validation.sessions import proxy_ids as check_proxy_ids
from activity._zset import ZSet
from activity.deadline import check_deadline
from activity.errors import (
    ReportRejected,
    ScanBudgetExhausted,
    SessionExpired,
    SessionFenced,
    SnapshotRejected,
)
from activity.memory._records import Runtime, Session
from activity.memory._state import PoolState
from activity.memory.extract import extracted_view
from activity.memory.ownership import lease_ms, release_drained
from activity.types import (
    AssignableProxies,
    AssignableProxy,
    DrainTicket,
    HeldProxy,
    ReportResult,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    UpstreamInventory,
    WorkerAssignments,
    WorkerRevision,
    WorkerSession,
)

_MAX_REPORTED_IDS = 20  # a rejected report names at most this many offending proxies


class WorkerSessions:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    # ------------------------------------------------------------------ SessionWriter
    def open_session(self, worker_id: str, session_id: str, ttl: timedelta) -> WorkerSession:
        s = self._s
        text(worker_id, "worker_id", s.options)
        text(session_id, "session_id", s.options)
        ttl_ms = lease_ms(ttl, s.options)
        with s.lock:
            check_deadline()
            now = s.server_now()
            live = s.live_session(worker_id)
            if live is not None and live.session_id == session_id:
                live.expires_ms = now + ttl_ms  # heartbeat of the current instance
                s.session_expiry.add(worker_id, live.expires_ms)
                return live.view(worker_id)
            # A new instance: the old one is fenced and its counts are no longer trusted.
            s.generation += 1
            session = Session(session_id, s.generation, now + ttl_ms)
            s.sessions[worker_id] = session
            s.session_expiry.add(worker_id, session.expires_ms)
            _drop_runtime(s, worker_id)
            return session.view(worker_id)

    def _session_for_write(self, worker_id: str, session_id: str) -> Session:
        s = self._s
        text(worker_id, "worker_id", s.options)
        text(session_id, "session_id", s.options)
        check_deadline()
        session = s.sessions.get(worker_id)
        if session is None or session.session_id != session_id:
            raise SessionFenced("this worker session was replaced or never opened")
        if session.expires_ms <= s.server_now():
            raise SessionExpired("this worker session has expired")
        return session

    # ------------------------------------------------------------------ ControlStore
    def worker_assignments(self, worker_id: str, limit: int, offset: int = 0) -> WorkerAssignments:
        s = self._s
        text(worker_id, "worker_id", s.options)
        n = count(limit, "limit", low=1, high=s.options.max_report_entries)
        at = count(offset, "offset", low=0, high=s.options.max_report_entries)
        with s.lock:
            check_deadline()
            owned = s.worker_owned.get(worker_id) or ZSet()
            items = tuple(s.owners[pid].view(pid) for pid, _ in owned.range(at, n))
            held = {
                a.proxy_id: HeldProxy(extracted_view(rec), rec.state, rec.max_concurrency)
                for a in items
                if (rec := s.records.get(a.proxy_id)) is not None
            }
            return WorkerAssignments(
                s.epoch,
                items,
                complete=len(owned) <= at + n,
                held=held,
                revision=s.revisions.get(worker_id, 0),
            )

    def worker_revision(self, worker_id: str) -> WorkerRevision:
        s = self._s
        text(worker_id, "worker_id", s.options)
        with s.lock:
            check_deadline()
            live = s.live_session(worker_id)
            return WorkerRevision(
                s.revisions.get(worker_id, 0), None if live is None else live.view(worker_id)
            )

    def assignable(
        self, upstream_id: str, limit: int, min_remaining: timedelta
    ) -> AssignableProxies:
        s = self._s
        token(upstream_id, "upstream_id")
        n = count(limit, "limit", low=1, high=s.options.scan_budget)
        remaining = duration_ms(min_remaining, "min_remaining")
        with s.lock:
            check_deadline()
            now = s.now()
            page = s.index(("upstream", upstream_id)).top_above(now + remaining, n + 1)
            proxies = tuple(
                AssignableProxy(pid, rec.max_concurrency, from_ms(rec.usable_ms))
                for pid, _ in page[:n]
                if (rec := s.records[pid]).expires_ms > now
            )
            return AssignableProxies(proxies, complete=len(page) <= n)

    def issue_snapshot(
        self, worker_id: str, session_id: str, ref: SnapshotRef, proxy_ids: Collection[str]
    ) -> int:
        s = self._s
        snapshot_ref(ref, s.options)
        included = check_proxy_ids(proxy_ids, s.options, "proxy_ids")
        with s.lock:
            session = self._session_for_write(worker_id, session_id)
            if ref.epoch > s.epoch:
                raise SnapshotRejected("snapshot epoch is ahead of the pool", reason="epoch_ahead")
            if session.issued == ref:
                return 0  # the same issue again
            issued = session.issued
            if issued is not None and (ref.version <= issued.version or ref.epoch < issued.epoch):
                raise SnapshotRejected(
                    "snapshot versions and epochs must not go back", reason="version_order"
                )
            for pid in included:
                ticket = s.tickets.get(pid)
                if (
                    ticket is not None
                    and ticket.worker_id == worker_id
                    and ticket.required_epoch <= ref.epoch
                ):
                    # Built after the drain began, yet it still routes through the proxy.
                    raise SnapshotRejected(
                        "a snapshot this new must not include a draining proxy",
                        reason="includes_draining",
                    )
            pending = s.worker_draining.get(worker_id) or ZSet()
            if len(pending) > s.options.scan_budget:
                raise ScanBudgetExhausted("too many pending drain tickets for one worker")
            session.issued = ref
            bound = 0
            for pid in pending:
                ticket = s.tickets[pid]
                fresh = ticket.snapshot is None or ticket.generation != session.generation
                if fresh and ticket.required_epoch <= ref.epoch and pid not in included:
                    ticket.snapshot, ticket.generation = ref, session.generation
                    bound += 1
            return bound

    def acknowledge_snapshot(self, worker_id: str, session_id: str, version: int) -> WorkerSession:
        count(version, "version", low=1, high=MAX_COUNTER)
        with self._s.lock:
            session = self._session_for_write(worker_id, session_id)
            if session.issued is None or session.issued.version != version:
                raise SnapshotRejected("that snapshot was not the last issued", reason="not_issued")
            session.acked = session.issued
            return session.view(worker_id)

    def drain_tickets(self, worker_id: str, limit: int) -> list[DrainTicket]:
        s = self._s
        text(worker_id, "worker_id", s.options)
        n = check_limit(limit, s.options)
        with s.lock:
            check_deadline()
            pending = s.worker_draining.get(worker_id) or ZSet()
            out = []
            for pid, _ in pending.first(n):
                t = s.tickets[pid]
                began = None if t.began_ms is None else from_ms(t.began_ms)
                out.append(
                    DrainTicket(
                        pid, worker_id, t.assignment_epoch, t.required_epoch, t.snapshot, began
                    )
                )
            return out

    # ------------------------------------------------------------------ ReportWriter
    def write_report(self, report: RuntimeReport) -> ReportResult:
        s = self._s
        prepared = prepare_report(report, s.options)
        with s.lock:
            wid = report.worker_id
            session = self._session_for_write(wid, report.session_id)
            if report.sequence == session.last_sequence:
                if prepared.body_digest == session.last_digest:
                    return ReportResult(replayed=True)
                raise ReportRejected("same sequence, different report", reason="sequence_conflict")
            if report.sequence < session.last_sequence:
                raise ReportRejected("report sequence went backwards", reason="sequence_regression")
            if report.sequence != session.last_sequence + 1:
                raise ReportRejected("report sequence skipped a number", reason="sequence_gap")
            acked = session.acked
            if acked is None or (report.snapshot_version, report.epoch) != (
                acked.version,
                acked.epoch,
            ):
                raise ReportRejected(
                    "report must carry the ACKed snapshot version and epoch",
                    reason="snapshot_mismatch",
                )
            foreign = [
                e.proxy_id
                for e in report.entries
                if (e.active or e.reserved) and not self._owned_by(e.proxy_id, wid, e.epoch)
            ]
            if foreign:
                raise ReportRejected(
                    "non-zero counts for proxies this worker does not own at that epoch",
                    reason="ownership_mismatch",
                    proxy_ids=sorted(foreign)[:_MAX_REPORTED_IDS],
                )
            now = s.server_now()
            runtime = Runtime(
                report.session_id,
                report.sequence,
                report.snapshot_version,
                report.epoch,
                {e.proxy_id: e for e in report.entries},
                now + span_ms(s.options.report_ttl),
                reported_ms=now,
            )
            s.runtime[wid] = runtime
            s.runtime_expiry.add(wid, runtime.expires_ms)
            session.last_sequence, session.last_digest = report.sequence, prepared.body_digest
            return ReportResult(released=release_drained(s, wid))

    def _owned_by(self, proxy_id: str, worker_id: str, epoch: int) -> bool:
        owner = self._s.owners.get(proxy_id)
        return owner is not None and owner.worker_id == worker_id and owner.epoch == epoch

    # ------------------------------------------------------------------ RuntimeReader
    def read_runtime(self, worker_id: str) -> RuntimeView | None:
        s = self._s
        text(worker_id, "worker_id", s.options)
        with s.lock:
            check_deadline()
            runtime = s.fresh_runtime(worker_id)
            if runtime is None:
                return None
            return RuntimeView(
                worker_id,
                runtime.session_id,
                runtime.sequence,
                runtime.snapshot_version,
                runtime.epoch,
                tuple(sorted(runtime.entries.values(), key=lambda e: e.proxy_id)),
                from_ms(runtime.expires_ms),
                None if runtime.reported_ms is None else from_ms(runtime.reported_ms),
            )

    # ------------------------------------------------------------------ SlotsReader
    def upstream_inventory(self, upstream_id: str) -> UpstreamInventory:
        token(upstream_id, "upstream_id")
        s = self._s
        with s.lock:
            now = self._cleaned_now(upstream_id)
            unassigned = s.index(("upstream", upstream_id))
            assigned = s.owned.get(upstream_id) or ZSet()
            budget = s.options.scan_budget
            if unassigned.count_above(now) + assigned.count_above(now) > budget:
                raise ScanBudgetExhausted("upstream has more proxies than one slots scan covers")
            slots = sum(s.records[pid].max_concurrency for pid in unassigned.above(now, budget))
            # The check above keeps both ranges whole: held and capacity are exact, never partial.
            held = capacity = 0
            for pid in assigned.above(now, budget):
                held += 1
                capacity += s.records[pid].max_concurrency
                slots += self._assigned_slots(pid, now)
            return UpstreamInventory(
                s.managed.get(upstream_id, 0),
                slots,
                extractable=unassigned.count_above(now),
                gateway_held=held,
                gateway_capacity=capacity,
            )

    def extractable(self, upstream_id: str) -> int:
        token(upstream_id, "upstream_id")
        with self._s.lock:
            now = self._cleaned_now(upstream_id)
            # A count of the index, never a read of its members: no scan budget applies.
            return self._s.index(("upstream", upstream_id)).count_above(now)

    def _cleaned_now(self, upstream_id: str) -> int:
        """Under the lock: the pool's now, once the upstream's expired records are cleaned
        (the slots reads must be exact; too much to clean is ScanBudgetExhausted)."""
        check_deadline()
        now = self._s.now()
        self._s.clean_for_read(upstream_id, now)
        return now

    def _assigned_slots(self, proxy_id: str, now: int) -> int:
        s = self._s
        owner = s.owners[proxy_id]
        runtime = s.fresh_runtime(owner.worker_id)
        if owner.lease_ms <= now or runtime is None or runtime.epoch < owner.epoch:
            return 0  # unknown runtime (none, or from before this assignment): fail closed
        maximum = s.records[proxy_id].max_concurrency
        entry = runtime.entries.get(proxy_id)
        if entry is None:
            return maximum  # sparse report: missing means idle
        if entry.epoch != owner.epoch:
            return 0  # counts from another assignment say nothing about this one
        return max(0, maximum - entry.active - entry.reserved)


def clean_sessions(state: PoolState, now_ms: int, limit: int) -> tuple[int, bool]:
    """Forget expired sessions and runtime reports (the ADR's *-expiry indexes)."""
    for worker_id in state.runtime_expiry.at_most(now_ms, limit):
        _drop_runtime(state, worker_id)
    due = state.session_expiry.at_most(now_ms, limit + 1)
    for worker_id in due[:limit]:
        state.session_expiry.remove(worker_id)
        del state.sessions[worker_id]
        _drop_runtime(state, worker_id)
    return min(len(due), limit), len(due) > limit


def _drop_runtime(state: PoolState, worker_id: str) -> None:
    state.runtime.pop(worker_id, None)
    state.runtime_expiry.remove(worker_id)
