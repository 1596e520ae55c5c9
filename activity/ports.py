"""The narrow ports callers depend on (ADR-005 "模块边界").

A service depends on the one port it needs, never on a store's keys, scripts or reply
formats. ``MemoryPool`` and ``RedisPool`` implement all of them; the contract suite in
``activity.contract`` proves they behave alike.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from activity.inspection import BrowsePage, BrowseQuery, LiveWorkers, ProxyDetail
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


class Upserter(Protocol):
    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult: ...


class HealthStore(Protocol):
    def apply_health(self, updates: Sequence[HealthUpdate]) -> HealthResult: ...


class InventoryReader(Protocol):
    def inventory(self, upstream_id: str) -> int:
        """Current unextracted, unexpired proxies of the upstream (exact, or an error)."""
        ...


class RecheckQueue(Protocol):
    def take_due_checks(
        self, upstream_id: str, now: datetime, policy: RecheckPolicy, limit: int
    ) -> DueChecks:
        """The upstream's idle proxies (unassigned AVAILABLE and SUSPECT) due for a recheck at
        ``now`` under ``policy``, oldest check first, at most ``limit``; one bounded scan
        (``scan_budget`` index members), so ``complete`` says whether it saw them all."""
        ...


class ExtractionStore(Protocol):
    def extract(self, request: ExtractRequest) -> ExtractResult: ...


class CallCounter(Protocol):
    """A client's ``CallQuota`` outside an extract (an extract checks and charges its own)."""

    def charge_call(self, client_id: str, quota: CallQuota) -> None:
        """Take one call unit, or raise ``QuotaExceeded`` (reason ``calls``, nothing taken)."""
        ...


class OwnershipRepository(Protocol):
    def assign(
        self, now: datetime, proxy_id: str, worker_id: str, ttl: timedelta
    ) -> Assignment: ...

    def renew(
        self, now: datetime, proxy_id: str, worker_id: str, epoch: int, ttl: timedelta
    ) -> Assignment: ...

    def begin_drain(self, proxy_id: str, worker_id: str, epoch: int) -> Assignment: ...

    def acknowledge_drain(
        self, proxy_id: str, worker_id: str, epoch: int, active: int, reserved: int
    ) -> DrainStatus: ...

    def get(self, proxy_id: str) -> Assignment | None: ...

    def expire(self, now: datetime, limit: int) -> list[Assignment]: ...


class SessionWriter(Protocol):
    def open_session(self, worker_id: str, session_id: str, ttl: timedelta) -> WorkerSession:
        """Open, renew (same ID) or replace (new ID, fencing the old) a worker's session."""
        ...


class ReportWriter(Protocol):
    def write_report(self, report: RuntimeReport) -> ReportResult: ...


class RuntimeReader(Protocol):
    def read_runtime(self, worker_id: str) -> RuntimeView | None:
        """The worker's fresh runtime report, or None if missing, expired or fenced."""
        ...


class ControlStore(Protocol):
    def worker_assignments(self, worker_id: str, limit: int, offset: int = 0) -> WorkerAssignments:
        """The worker's non-draining assignments from ``offset`` in lease order, at most
        ``limit``, with their proxies, the epoch and the holdings revision, in one atomic
        step; ``complete`` False when more follow. Pages are one read only if each page's
        revision is the first's (``activity.holdings.read_holdings``)."""
        ...

    def worker_revision(self, worker_id: str) -> WorkerRevision:
        """The worker's holdings revision and live session, in one O(1) step (no holdings
        read): when neither changed since a snapshot was built, that snapshot still holds."""
        ...

    def assignable(
        self, upstream_id: str, limit: int, min_remaining: timedelta
    ) -> AssignableProxies:
        """Up to ``limit`` of the upstream's AVAILABLE, unowned, unexpired proxies usable for at
        least ``min_remaining`` more, the longest usable first (extract takes the soonest
        first: the two draw from the two ends of one index). A read: ``assign`` decides."""
        ...

    def issue_snapshot(
        self, worker_id: str, session_id: str, ref: SnapshotRef, proxy_ids: Collection[str]
    ) -> int:
        """Record a complete snapshot issued to the session; returns drain tickets bound."""
        ...

    def acknowledge_snapshot(
        self, worker_id: str, session_id: str, version: int
    ) -> WorkerSession: ...

    def drain_tickets(self, worker_id: str, limit: int) -> list[DrainTicket]: ...


class SlotsReader(Protocol):
    """The ADR's ``pool.InventoryReader``: managed proxies and free gateway slots."""

    def upstream_inventory(self, upstream_id: str) -> UpstreamInventory: ...

    def extractable(self, upstream_id: str) -> int:
        """The upstream's AVAILABLE, unowned, unexpired proxies (what an extract could draw
        now): ``upstream_inventory(...).extractable``, exact, but counted without reading the
        proxies, so any number of them answers. Its expired records are cleaned first
        (``ScanBudgetExhausted`` only when more remain than one scan cleans)."""
        ...


class OutcomeStore(Protocol):
    """Outcome reports of extracting clients and the quarantine of banned exits."""

    def report_outcome(self, report: OutcomeReport) -> OutcomeResult:
        """Record how an extracted proxy went; only its extracting client, only once."""
        ...

    def quarantine_of(self, proxy_ids: Sequence[str], now: datetime) -> dict[str, frozenset[str]]:
        """For each given live proxy whose exit is quarantined at ``now``: the banned target
        hosts ("*": every host). Proxies without a live quarantine are left out."""
        ...


class Maintenance(Protocol):
    def sweep(self, limit: int) -> SweepResult: ...


class PoolInspector(Protocol):
    """The console's reads: bounded pages of the pool and one proxy whole (inspection.py)."""

    def browse(self, query: BrowseQuery) -> BrowsePage: ...

    def proxy_detail(self, proxy_id: str) -> ProxyDetail | None:
        """The live proxy, or None (never held, removed, or past its hard expiry)."""
        ...

    def worker_sessions(self, limit: int) -> LiveWorkers:
        """Up to ``limit`` live worker sessions (soonest to expire first), each with its fresh
        runtime report and its counts of proxies held and draining."""
        ...


class ActivityPool(
    Upserter,
    HealthStore,
    InventoryReader,
    RecheckQueue,
    ExtractionStore,
    CallCounter,
    OwnershipRepository,
    SessionWriter,
    ReportWriter,
    RuntimeReader,
    ControlStore,
    SlotsReader,
    OutcomeStore,
    Maintenance,
    PoolInspector,
    Protocol,
):
    """Every port at once: what the contract suite and the admin console hold."""
