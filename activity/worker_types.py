"""What the ownership, worker session, snapshot and runtime report ports take and answer
(ADR-005 "Ownership", "Worker 运行态"): the gateway workers' side of the pool. Imported from
``activity.types`` as well, where every other port's types are."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Assignment:
    proxy_id: str
    worker_id: str
    epoch: int
    lease_expires_at: datetime
    draining: bool = False


class DrainStatus(StrEnum):
    RELEASED = "released"
    #: Active or reserved connections remain.
    WAITING_COUNTS = "waiting_counts"
    #: No complete snapshot excluding the proxy has been issued and ACKed yet.
    WAITING_SNAPSHOT = "waiting_snapshot"


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    version: int
    epoch: int
    checksum: str


@dataclass(frozen=True, slots=True)
class DrainTicket:
    proxy_id: str
    worker_id: str
    assignment_epoch: int
    #: The global epoch the first begin_drain moved to; an excluding snapshot must be this new.
    required_epoch: int
    #: The first complete excluding snapshot issued to the worker's session, once bound.
    snapshot: SnapshotRef | None = None
    #: When the drain began (the store's clock): the console shows a ticket's age. Not part of
    #: the ticket's value: two stores' clocks differ by a millisecond or more.
    began_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class WorkerSession:
    worker_id: str
    session_id: str
    #: Store-assigned, strictly increasing per pool: reusing a session ID after it expired
    #: still makes a new generation, so nothing bound to the old one carries over.
    generation: int
    expires_at: datetime
    issued: SnapshotRef | None = None
    acked: SnapshotRef | None = None


@dataclass(frozen=True, slots=True)
class WorkerRevision:
    """A worker's holdings revision and its live session, read in one atomic step without
    reading the holdings (``ControlStore.worker_revision``): while the revision stays the
    same, what the worker's snapshot says of its proxies has not changed."""

    #: Goes up with every change to one of the worker's assignments and every rewrite of a
    #: record it holds without draining (docs/activity-pool.md "Holdings revision"); never
    #: for another worker's changes, reads, health updates or the session's own calls.
    #: 0: nothing counted yet.
    revision: int
    #: The worker's live session (with its issued and ACKed snapshots), or None: none, or
    #: expired.
    session: WorkerSession | None


@dataclass(frozen=True, slots=True)
class AssignableProxy:
    """A proxy the ownership manager may assign: AVAILABLE, held by no one, long-lived enough."""

    proxy_id: str
    #: Its capacity (connections at once): what an assignment adds to a worker's.
    max_concurrency: int
    usable_until: datetime


@dataclass(frozen=True, slots=True)
class AssignableProxies:
    """One upstream's assignment candidates, the longest usable first."""

    proxies: tuple[AssignableProxy, ...]
    #: False when more candidates follow the limit asked for.
    complete: bool


@dataclass(frozen=True, slots=True)
class RuntimeEntry:
    proxy_id: str
    #: The assignment epoch the worker holds the proxy under.
    epoch: int
    active: int
    reserved: int
    draining: bool = False


@dataclass(frozen=True, slots=True)
class RuntimeReport:
    worker_id: str
    session_id: str
    sequence: int
    snapshot_version: int
    epoch: int
    entries: tuple[RuntimeEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class ReportResult:
    replayed: bool = False
    #: Draining proxies this report released (zero counts, ticket bound to an ACKed snapshot).
    released: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RuntimeView:
    worker_id: str
    session_id: str
    sequence: int
    snapshot_version: int
    epoch: int
    entries: tuple[RuntimeEntry, ...]
    expires_at: datetime
    #: When the store took the report (its clock): the console shows a report's age. Not part
    #: of the view's value: two stores' clocks differ by a millisecond or more.
    reported_at: datetime | None = field(default=None, compare=False)
