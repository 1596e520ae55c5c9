"""The rows of MemoryPool's tables, one dataclass per kind of Redis hash in the keyspace."""

from __future__ import annotations

from dataclasses import dataclass, field

from activity._time import from_ms
from activity.types import Assignment, Outcome, ProxyState, RuntimeEntry, SnapshotRef, WorkerSession

#: States a proxy never leaves in its lifecycle: no refresh or health update applies.
TERMINAL = (ProxyState.EXTRACTED, ProxyState.REMOVED)


@dataclass(slots=True)
class Record:
    proxy_id: str
    upstream_id: str
    key_digest: str
    host: str
    port: int
    protocol: str
    region: str | None
    carrier: str | None
    max_concurrency: int
    expires_ms: int
    usable_ms: int
    fetched_ms: int
    username: str | None
    password: str | None = field(repr=False)
    labels: tuple[tuple[str, str], ...]
    state: ProxyState = ProxyState.FETCHED
    checked_ms: int | None = None
    success_ms: int | None = None
    latency_ms: int | None = None
    failure_reason: str | None = None
    extracted_by: str | None = None


@dataclass(frozen=True, slots=True)
class StoredOutcome:
    outcome: Outcome
    host: str | None
    #: The quarantine end this report set (or kept, when a longer one stood), or None.
    until_ms: int | None


@dataclass(slots=True)
class Owner:
    worker_id: str
    epoch: int
    lease_ms: int
    draining: bool = False

    def view(self, proxy_id: str) -> Assignment:
        return Assignment(
            proxy_id, self.worker_id, self.epoch, from_ms(self.lease_ms), self.draining
        )


@dataclass(slots=True)
class Ticket:
    worker_id: str
    assignment_epoch: int
    required_epoch: int
    snapshot: SnapshotRef | None = None
    generation: int | None = None  # the session generation the snapshot was issued to
    began_ms: int | None = None  # server clock


@dataclass(slots=True)
class Session:
    session_id: str
    generation: int
    expires_ms: int
    issued: SnapshotRef | None = None
    acked: SnapshotRef | None = None
    last_sequence: int = 0
    last_digest: str | None = None

    def view(self, worker_id: str) -> WorkerSession:
        expires = from_ms(self.expires_ms)
        return WorkerSession(
            worker_id, self.session_id, self.generation, expires, self.issued, self.acked
        )


@dataclass(slots=True)
class Runtime:
    session_id: str
    sequence: int
    snapshot_version: int
    epoch: int
    entries: dict[str, RuntimeEntry]
    expires_ms: int
    reported_ms: int | None = None  # server clock


@dataclass(slots=True)
class Replay:
    request_digest: str
    expires_ms: int
    value: object = field(repr=False)
