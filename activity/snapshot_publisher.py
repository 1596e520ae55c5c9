"""The snapshot publisher: a gateway worker's snapshot, built from what it holds, sealed,
issued to its session, and acknowledged (docs/gateway.md has the flow; ADR-005 "Worker 运行态"
the rules the pool keeps).

A snapshot is built from the worker's own ``worker-owned`` index only (``worker_assignments``
in pages read as one, activity/holdings.py; never a scan of the pool), bounded by
``PublisherPolicy.max_proxies``. An unchanged snapshot is answered without a rebuild: its
entity tag names the session generation, the worker's holdings revision, the clients' stamp
and the version last issued, and the pool
reads the first two and the last in one O(1) step (``worker_revision``). Any change to what
the worker holds moves the revision, a new session moves the generation, a change to the
clients moves their stamp, and another build moves the version; so a matching tag means the
worker already has exactly this content.

The clients (API clients allowed at the gateway, with their key verifiers) come from the
caller, which reads them from its configuration; this module imports no Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from activity.clock import Clock
from activity.errors import SessionFenced, SnapshotRejected
from activity.holdings import read_holdings
from activity.ports import ControlStore
from activity.types import Assignment, HeldProxy, SnapshotRef, WorkerAssignments, WorkerSession
from gateway_runtime.wire import (
    Credential,
    GatewayClient,
    SealedSnapshot,
    Snapshot,
    SnapshotAck,
    SnapshotProxy,
    seal_snapshot,
)
from gateway_runtime.wire.snapshot import canonical_clients


class SnapshotTooLarge(Exception):
    """The worker holds more proxies than a snapshot carries (temporarily: the manager drains
    what is over its share); nothing was issued."""

    code = "snapshot_too_large"


class AckMismatch(Exception):
    """An ACK names the last issued version but another epoch (``code`` ``stale_epoch``) or
    checksum (``checksum_mismatch``): the worker did not receive, or did not verify, the
    snapshot it claims; nothing was acknowledged."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ClientSet:
    """The gateway clients every snapshot carries, and a stamp that changes with them."""

    clients: tuple[GatewayClient, ...]
    stamp: str

    @classmethod
    def of(cls, clients: Sequence[GatewayClient]) -> ClientSet:
        ordered = tuple(sorted(clients, key=lambda c: c.name))
        digest = hashlib.sha256(canonical_clients(ordered)).hexdigest()
        return cls(ordered, digest[:20])


@dataclass(frozen=True, slots=True)
class PublisherPolicy:
    #: The pool's ``max_report_entries``: a worker must be able to report every proxy it holds.
    max_proxies: int = 10_000
    #: Past this age without a newer snapshot a worker stops taking new traffic.
    max_staleness: timedelta = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Published:
    """A snapshot request's answer: the entity tag, and the snapshot unless it is unchanged."""

    etag: str
    #: None: the worker's ``If-None-Match`` matched; it has this snapshot already.
    sealed: SealedSnapshot | None


class PublisherPool(ControlStore, Protocol):
    """The ports the publisher uses (ControlStore, with ``worker_revision``)."""


class SnapshotPublisher:
    def __init__(self, pool: PublisherPool, clock: Clock, policy: PublisherPolicy) -> None:
        self._pool = pool
        self._clock = clock
        self._policy = policy

    def current(
        self, worker_id: str, session_id: str, clients: ClientSet, if_none_match: str | None
    ) -> Published:
        """The worker's current snapshot for its live session ``session_id``: a 304's answer
        when ``if_none_match`` is its tag, else built, sealed and issued. ``SessionFenced``
        when the session is not the worker's live one; ``SnapshotTooLarge``."""
        for attempt in range(3):
            basis = self._pool.worker_revision(worker_id)
            session = _live(basis.session, session_id)
            if session.issued is not None and if_none_match is not None:
                tag = _etag(session, basis.revision, clients, session.issued.version)
                if if_none_match == tag:
                    return Published(tag, None)
            try:
                return self._build(worker_id, session, clients)
            except SnapshotRejected as exc:
                # Another request of the same session issued a version in between (the pool
                # refused ours as out of order): build again over its version.
                if exc.reason != "version_order" or attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def acknowledge(self, worker_id: str, session_id: str, ack: SnapshotAck) -> WorkerSession:
        """Record the worker's ACK of the snapshot last issued to its session. The pool refuses
        any other version (``SnapshotRejected`` ``not_issued``); ``AckMismatch`` when the version
        is right but the epoch or checksum is not the issued snapshot's."""
        session = _live(self._pool.worker_revision(worker_id).session, session_id)
        issued = session.issued
        if issued is not None and issued.version == ack.version:
            if issued.epoch != ack.epoch:
                raise AckMismatch(
                    f"snapshot {ack.version} was issued at epoch {issued.epoch}", "stale_epoch"
                )
            if issued.checksum != ack.checksum:
                raise AckMismatch(
                    f"snapshot {ack.version} was issued with another checksum; verify it "
                    "before acknowledging",
                    "checksum_mismatch",
                )
        return self._pool.acknowledge_snapshot(worker_id, session_id, ack.version)

    def _build(self, worker_id: str, session: WorkerSession, clients: ClientSet) -> Published:
        held = read_holdings(self._pool, worker_id, self._policy.max_proxies)
        if not held.complete:
            raise SnapshotTooLarge(
                f"the worker holds more than {self._policy.max_proxies} proxies; "
                "the ownership manager drains the excess"
            )
        version = 1 if session.issued is None else session.issued.version + 1
        snapshot = self._snapshot(held, version, clients)
        sealed = seal_snapshot(snapshot)
        ref = SnapshotRef(version, snapshot.epoch, sealed.checksum)
        proxy_ids = [p.proxy_id for p in snapshot.proxies]
        self._pool.issue_snapshot(worker_id, session.session_id, ref, proxy_ids)
        return Published(_etag(session, held.revision, clients, version), sealed)

    def _snapshot(self, held: WorkerAssignments, version: int, clients: ClientSet) -> Snapshot:
        proxies: list[SnapshotProxy] = []
        refs: dict[tuple[str, str], Credential] = {}
        for assignment in sorted(held.assignments, key=lambda a: a.proxy_id):
            proxy = held.held.get(assignment.proxy_id)
            if proxy is None:  # its record is gone (hard expiry): nothing to route through
                continue
            ref = _credential_ref(proxy, refs)
            proxies.append(_snapshot_proxy(proxy, assignment, ref))
        return Snapshot(
            version=version,
            epoch=held.epoch,
            issued_at=self._clock.now(),
            max_staleness=self._policy.max_staleness,
            proxies=tuple(proxies),
            credentials=tuple(refs.values()),
            clients=clients.clients,
        )


def _live(session: WorkerSession | None, session_id: str) -> WorkerSession:
    if session is None or session.session_id != session_id:
        raise SessionFenced("this is not the worker's live session; open a new one")
    return session


def _etag(session: WorkerSession, revision: int, clients: ClientSet, version: int) -> str:
    return f'"g{session.generation}-r{revision}-c{clients.stamp}-v{version}"'


def _credential_ref(proxy: HeldProxy, refs: dict[tuple[str, str], Credential]) -> str | None:
    """The snapshot's reference for the proxy's login, one per distinct login: a name local to
    the snapshot ("c1", "c2", ...), never the provider's SecretRef or anything derived from
    the password."""
    p = proxy.proxy
    if p.username is None:
        return None
    login = (p.username, p.password or "")
    found = refs.get(login)
    if found is None:
        found = refs[login] = Credential(f"c{len(refs) + 1}", *login)
    return found.ref


def _snapshot_proxy(held: HeldProxy, assignment: Assignment, ref: str | None) -> SnapshotProxy:
    p = held.proxy
    return SnapshotProxy(
        proxy_id=p.proxy_id,
        host=p.host,
        port=p.port,
        protocol=p.protocol,
        region=p.region,
        carrier=p.carrier,
        upstream=p.upstream_id,
        labels=p.labels,
        max_concurrency=held.max_concurrency,
        assignment_epoch=assignment.epoch,
        lease_expires_at=assignment.lease_expires_at,
        usable_until=p.usable_until,
        credential_ref=ref,
    )
