"""MemoryPool: the reference semantics of ADR-005, in one process.

Every port of the activity pool, thread safe (one lock: each public call is one atomic step, as
each Lua script is in Redis), with an injectable clock and the same bounds as RedisPool.

The package is laid out by port family, as the Lua library is: ``_records`` holds the tables'
rows, ``_state`` every table and the lock, with the bookkeeping several families share;
``upsert`` (upsert, health, inventory, rechecks due), ``extract`` (extract, call quota),
``ownership`` (leases, drain), ``sessions`` (sessions, snapshots, reports, slots), ``outcomes``
(outcomes, quarantine, an exit's suspicion), ``sweep`` and ``inspection`` (the console's reads)
each hold one family's operations over that state. ``MemoryPool`` only wires them together.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from activity.clock import Clock, SystemClock
from activity.credentials import CredentialResolver, NoCredentials
from activity.inspection import BrowsePage, BrowseQuery, LiveWorkers, ProxyDetail
from activity.memory._records import Record, Session
from activity.memory._state import PoolState
from activity.memory.extract import Extracts
from activity.memory.inspection import Inspector
from activity.memory.outcomes import Outcomes
from activity.memory.ownership import Ownership
from activity.memory.sessions import WorkerSessions
from activity.memory.sweep import Sweeper
from activity.memory.upsert import Upserts
from activity.types import (
    AssignableProxies,
    Assignment,
    CallQuota,
    DrainStatus,
    DrainTicket,
    DueChecks,
    ExtractRequest,
    ExtractResult,
    FetchedBatch,
    HealthResult,
    HealthUpdate,
    OutcomeReport,
    OutcomeResult,
    PoolOptions,
    RecheckPolicy,
    ReportResult,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    SweepResult,
    UpsertResult,
    UpstreamInventory,
    WorkerAssignments,
    WorkerRevision,
    WorkerSession,
)

__all__ = ["MemoryPool"]


class MemoryPool:
    """Reference implementation of every activity-pool port.

    ``clock`` is the caller's time (proxy TTLs, health freshness, extract); ``server_clock``
    stands for Redis server time (session and report TTLs) and defaults to ``clock``.
    """

    def __init__(
        self,
        options: PoolOptions | None = None,
        *,
        clock: Clock | None = None,
        server_clock: Clock | None = None,
        credentials: CredentialResolver | None = None,
    ) -> None:
        self.options = options or PoolOptions()
        caller_clock = clock or SystemClock()
        state = PoolState(
            self.options, caller_clock, server_clock or caller_clock, credentials or NoCredentials()
        )
        self._state = state
        self._upserts = Upserts(state)
        self._extracts = Extracts(state)
        self._ownership = Ownership(state)
        self._workers = WorkerSessions(state)
        self._outcomes = Outcomes(state)
        self._sweeper = Sweeper(state)
        self._inspector = Inspector(state)

    # The differential test reads the reference's tables to pick plausible inputs.
    @property
    def _records(self) -> dict[str, Record]:
        return self._state.records

    @property
    def _sessions(self) -> dict[str, Session]:
        return self._state.sessions

    # ------------------------------------------------------------------ Upserter, HealthStore,
    # InventoryReader, RecheckQueue
    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        return self._upserts.upsert_fetched(batch)

    def apply_health(self, updates: Sequence[HealthUpdate]) -> HealthResult:
        return self._upserts.apply_health(updates)

    def inventory(self, upstream_id: str) -> int:
        return self._upserts.inventory(upstream_id)

    def take_due_checks(
        self, upstream_id: str, now: datetime, policy: RecheckPolicy, limit: int
    ) -> DueChecks:
        return self._upserts.take_due_checks(upstream_id, now, policy, limit)

    # ------------------------------------------------------------------ ExtractionStore,
    # CallCounter
    def extract(self, request: ExtractRequest) -> ExtractResult:
        return self._extracts.extract(request)

    def charge_call(self, client_id: str, quota: CallQuota) -> None:
        self._extracts.charge_call(client_id, quota)

    # ------------------------------------------------------------------ OwnershipRepository
    def assign(self, now: datetime, proxy_id: str, worker_id: str, ttl: timedelta) -> Assignment:
        return self._ownership.assign(now, proxy_id, worker_id, ttl)

    def renew(
        self, now: datetime, proxy_id: str, worker_id: str, epoch: int, ttl: timedelta
    ) -> Assignment:
        return self._ownership.renew(now, proxy_id, worker_id, epoch, ttl)

    def begin_drain(self, proxy_id: str, worker_id: str, epoch: int) -> Assignment:
        return self._ownership.begin_drain(proxy_id, worker_id, epoch)

    def acknowledge_drain(
        self, proxy_id: str, worker_id: str, epoch: int, active: int, reserved: int
    ) -> DrainStatus:
        return self._ownership.acknowledge_drain(proxy_id, worker_id, epoch, active, reserved)

    def get(self, proxy_id: str) -> Assignment | None:
        return self._ownership.get(proxy_id)

    def expire(self, now: datetime, limit: int) -> list[Assignment]:
        return self._ownership.expire(now, limit)

    # ------------------------------------------------------------------ SessionWriter,
    # ControlStore, ReportWriter, RuntimeReader, SlotsReader
    def open_session(self, worker_id: str, session_id: str, ttl: timedelta) -> WorkerSession:
        return self._workers.open_session(worker_id, session_id, ttl)

    def worker_assignments(self, worker_id: str, limit: int, offset: int = 0) -> WorkerAssignments:
        return self._workers.worker_assignments(worker_id, limit, offset)

    def worker_revision(self, worker_id: str) -> WorkerRevision:
        return self._workers.worker_revision(worker_id)

    def assignable(
        self, upstream_id: str, limit: int, min_remaining: timedelta
    ) -> AssignableProxies:
        return self._workers.assignable(upstream_id, limit, min_remaining)

    def issue_snapshot(
        self, worker_id: str, session_id: str, ref: SnapshotRef, proxy_ids: Collection[str]
    ) -> int:
        return self._workers.issue_snapshot(worker_id, session_id, ref, proxy_ids)

    def acknowledge_snapshot(self, worker_id: str, session_id: str, version: int) -> WorkerSession:
        return self._workers.acknowledge_snapshot(worker_id, session_id, version)

    def drain_tickets(self, worker_id: str, limit: int) -> list[DrainTicket]:
        return self._workers.drain_tickets(worker_id, limit)

    def write_report(self, report: RuntimeReport) -> ReportResult:
        return self._workers.write_report(report)

    def read_runtime(self, worker_id: str) -> RuntimeView | None:
        return self._workers.read_runtime(worker_id)

    def upstream_inventory(self, upstream_id: str) -> UpstreamInventory:
        return self._workers.upstream_inventory(upstream_id)

    def extractable(self, upstream_id: str) -> int:
        return self._workers.extractable(upstream_id)

    # ------------------------------------------------------------------ OutcomeStore
    def report_outcome(self, report: OutcomeReport) -> OutcomeResult:
        return self._outcomes.report_outcome(report)

    def quarantine_of(self, proxy_ids: Sequence[str], now: datetime) -> dict[str, frozenset[str]]:
        return self._outcomes.quarantine_of(proxy_ids, now)

    # ------------------------------------------------------------------ Maintenance
    def sweep(self, limit: int) -> SweepResult:
        return self._sweeper.sweep(limit)

    # ------------------------------------------------------------------ PoolInspector
    def browse(self, query: BrowseQuery) -> BrowsePage:
        return self._inspector.browse(query)

    def proxy_detail(self, proxy_id: str) -> ProxyDetail | None:
        return self._inspector.proxy_detail(proxy_id)

    def worker_sessions(self, limit: int) -> LiveWorkers:
        return self._inspector.worker_sessions(limit)
