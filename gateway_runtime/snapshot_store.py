"""A gateway worker's local state: the snapshot it serves from, its proxies' capacity counters,
the proxies it still drains, and the runtime report built from them (ADR-005 "Worker 运行态与
容量汇总", "故障语义"; docs/gateway.md).

The request path reads only this: ``view()`` hands a connection one immutable ``View`` that it
keeps from start to end, and ``reserve``/``activate``/``release`` move the counters. A new
snapshot replaces the view in one assignment. The selector reads the served view's proxies as
``Hold``s (``holds``: each proxy's counters, its ticket and the moment it stops taking new work,
made once per snapshot) and reserves with ``take``, so that one reservation costs no look-up, no
clock read and no allocation: a worker makes hundreds of thousands a second on one core.

A proxy the new snapshot leaves out while connections still use it stays, as draining: it takes
no new work, its connections go on, and it is reported under the assignment epoch it was held
at until its counts reach zero. The draining registry is bounded: a snapshot that would push it
past ``max_draining`` is refused (the old view stays, and the refusal is returned to be logged
and reported).

Past ``max_staleness`` since the control plane last confirmed the snapshot (a 200 or a 304),
``view()`` answers None: the worker fails closed (503 to new traffic) and recovers by itself
at the next confirmation. Confined to one event loop: no locks (a connection's handler and the
control client run on the same loop).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from gateway_runtime.wire import (
    ReportEntry,
    RuntimeReportBody,
    Snapshot,
    SnapshotAck,
    SnapshotProxy,
)
from gateway_runtime.wire.limits import MAX_PROXIES

#: Removed-but-busy proxies kept at most (the wire's largest snapshot).
MAX_DRAINING = MAX_PROXIES


@dataclass(frozen=True, slots=True)
class View:
    """One snapshot as connections use it; never changed once made."""

    snapshot: Snapshot
    #: The snapshot's proxies by ID (a read-only mapping).
    proxies: Mapping[str, SnapshotProxy] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Ticket:
    """One connection's hold on a proxy: reserved, then active, then released once."""

    proxy_id: str
    epoch: int


@dataclass(slots=True, eq=False)
class Hold:
    """A proxy the worker holds: its entry in the served snapshot and its counters. The same
    object is kept (and its entry updated) across snapshots while the assignment is the same,
    so its connections count on; the selector reads it, only the store changes it."""

    proxy_id: str
    #: Its entry in the newest snapshot that has it.
    proxy: SnapshotProxy
    #: The assignment epoch the proxy is held under (its report entries name it).
    epoch: int
    maximum: int
    #: ``min(lease_expires_at, usable_until)``: from then on it takes no new connection.
    deadline: datetime
    #: Every reservation's ticket (a value: one made per hold, not per connection).
    ticket: Ticket
    active: int = 0
    reserved: int = 0
    #: ``active + reserved``, kept so a choice reads one number.
    used: int = 0
    #: Idle upstream connections kept open for the next request (``park``): reported as
    #: active (the vendor counts the TCP connection) but not in ``used``, so they never keep
    #: a request from the proxy; a request that takes the proxy past its maximum with them
    #: reuses or closes one (gateway_runtime/server/kept.py), so a proxy never carries more
    #: than its maximum.
    parked: int = 0

    @property
    def busy(self) -> bool:
        return self.used > 0 or self.parked > 0

    def update(self, proxy: SnapshotProxy) -> None:
        """The newer snapshot's entry for the same hold (its lease renewed, its maximum)."""
        self.proxy, self.maximum = proxy, proxy.max_concurrency
        self.deadline = min(proxy.lease_expires_at, proxy.usable_until)

    @classmethod
    def of(cls, proxy: SnapshotProxy) -> Hold:
        deadline = min(proxy.lease_expires_at, proxy.usable_until)
        ticket = Ticket(proxy.proxy_id, proxy.assignment_epoch)
        return cls(
            proxy.proxy_id, proxy, proxy.assignment_epoch, proxy.max_concurrency, deadline, ticket
        )


@dataclass(frozen=True, slots=True)
class Installed:
    """What ``install`` did: the snapshot taken (or refused, and why), and how many proxies it
    moved to draining."""

    taken: bool
    draining: int = 0
    refused: str = ""


class SnapshotStore:
    def __init__(self, clock: Callable[[], datetime], max_draining: int = MAX_DRAINING) -> None:
        self._clock = clock
        self._max_draining = max_draining
        self._view: View | None = None
        self._confirmed_at: datetime | None = None
        #: Every proxy with counts: the current snapshot's, and the draining ones.
        self._counts: dict[str, Hold] = {}
        #: The served snapshot's proxies (``holds``).
        self._served: Mapping[str, Hold] = MappingProxyType({})
        self._draining: set[str] = set()
        self._acked: SnapshotAck | None = None
        self.refusals = 0

    # ------------------------------------------------------------------ snapshots
    def install(self, snapshot: Snapshot) -> Installed:
        """Serve from ``snapshot`` (decoded and verified by the wire) from now on, unless it is
        older than the one served, or it would leave more busy proxies draining than the
        registry holds."""
        current = self._view.snapshot if self._view else None
        if current is not None and snapshot.version <= current.version:
            self.refusals += 1
            return Installed(False, refused=f"version {snapshot.version} is not newer")
        kept = {p.proxy_id: p for p in snapshot.proxies}
        leaving = [pid for pid, c in self._counts.items() if pid not in kept and c.busy]
        draining = self._draining | set(leaving)
        if len(draining - kept.keys()) > self._max_draining:
            self.refusals += 1
            return Installed(
                False,
                refused=f"more than {self._max_draining} busy proxies would be draining",
            )
        counts: dict[str, Hold] = {}
        for pid in draining - kept.keys():
            if self._counts[pid].busy:
                counts[pid] = self._counts[pid]
        for pid, proxy in kept.items():
            old = self._counts.get(pid)
            if old is not None and (old.epoch == proxy.assignment_epoch or old.busy):
                # The same assignment; or (never from the pool, which assigns a proxy again
                # only once it was released at zero counts) an older one still busy, kept
                # under its own epoch so its connections are never miscounted.
                old.update(proxy)
                counts[pid] = old
            else:
                counts[pid] = Hold.of(proxy)
        self._counts = counts
        self._draining = {pid for pid in counts if pid not in kept}
        self._served = MappingProxyType({pid: counts[pid] for pid in kept})
        self._view = View(snapshot, MappingProxyType(kept))
        self._confirmed_at = self._clock()
        return Installed(True, draining=len(self._draining))

    def confirm(self) -> None:
        """The control plane answered that the snapshot served is still current (a 304)."""
        if self._view is not None:
            self._confirmed_at = self._clock()

    def acknowledged(self, ack: SnapshotAck) -> None:
        """The control plane took the ACK of the snapshot served: reports name it."""
        self._acked = ack

    def view(self) -> View | None:
        """The snapshot to serve a new connection from; None to fail closed (none yet, or
        older than its maximum staleness since last confirmed)."""
        if self._view is None or self._confirmed_at is None:
            return None
        if self._clock() - self._confirmed_at > self._view.snapshot.max_staleness:
            return None
        return self._view

    # ------------------------------------------------------------------ counters
    def holds(self, view: View) -> Mapping[str, Hold] | None:
        """The view's proxies by ID to ``take`` from; None when ``view`` is not the one served
        (a connection holding an old view starts nothing new on it)."""
        return self._served if view is self._view else None

    def take(self, hold: Hold, now: datetime) -> Ticket | None:
        """A slot of ``hold`` (one of the served view's ``holds``) for a new connection: None
        when its lease or use has ended at ``now``, or it is full."""
        if hold.used >= hold.maximum or now >= hold.deadline:
            return None  # past the deadline the proxy may be another's: the worker's own safety
        hold.used += 1
        hold.reserved += 1
        return hold.ticket

    def reserve(self, view: View, proxy_id: str, now: datetime | None = None) -> Ticket | None:
        """A slot of ``proxy_id`` for a new connection: None when the proxy is not in the
        served snapshot (gone, or draining), its lease or use has ended, or it is full.
        ``now``: the caller's clock reading, if it has one (else the store's clock)."""
        holds = self.holds(view)
        hold = None if holds is None else holds.get(proxy_id)
        if hold is None:
            return None
        return self.take(hold, self._clock() if now is None else now)

    def activate(self, ticket: Ticket) -> None:
        """The reserved slot's connection is established."""
        counts = self._counts.get(ticket.proxy_id)
        if counts is not None and counts.epoch == ticket.epoch and counts.reserved > 0:
            counts.reserved -= 1
            counts.active += 1  # ``used`` is unchanged

    def release(self, ticket: Ticket, active: bool) -> None:
        """The connection ended (``active``: it had been activated). A draining proxy whose
        counts reach zero leaves the registry: absent from the next report, it is idle."""
        counts = self._counts.get(ticket.proxy_id)
        if counts is None or counts.epoch != ticket.epoch:
            return
        if active and counts.active > 0:
            counts.active -= 1
            counts.used -= 1
        elif not active and counts.reserved > 0:
            counts.reserved -= 1
            counts.used -= 1
        self._forget_if_drained(ticket.proxy_id, counts)

    def _forget_if_drained(self, proxy_id: str, counts: Hold) -> None:
        if proxy_id in self._draining and not counts.busy:
            self._draining.discard(proxy_id)
            del self._counts[proxy_id]

    def park(self, ticket: Ticket) -> bool:
        """The active connection of ``ticket`` is idle, kept open for a later request: its
        slot is free to choose, its connection still reported. False (nothing changed) when the
        proxy's hold is not that ticket's any more."""
        counts = self._counts.get(ticket.proxy_id)
        if counts is None or counts.epoch != ticket.epoch or counts.active == 0:
            return False
        counts.active -= 1
        counts.used -= 1
        counts.parked += 1
        return True

    def unpark(self, ticket: Ticket, reused: bool) -> None:
        """A parked connection is closed, or (``reused``) taken by a request whose reserved
        slot it becomes (that slot is activated)."""
        counts = self._counts.get(ticket.proxy_id)
        if counts is None or counts.epoch != ticket.epoch or counts.parked == 0:
            return
        counts.parked -= 1
        if reused and counts.reserved > 0:
            counts.reserved -= 1
            counts.active += 1
        self._forget_if_drained(ticket.proxy_id, counts)

    def crowded(self, ticket: Ticket) -> bool:
        """Whether the proxy's connections, parked ones included, are past its maximum (a new
        connection must then replace a parked one)."""
        counts = self._counts.get(ticket.proxy_id)
        return counts is not None and counts.used + counts.parked > counts.maximum

    def load(self, proxy_id: str) -> int:
        """Connections and reservations the proxy has now (0 for one not counted)."""
        counts = self._counts.get(proxy_id)
        return 0 if counts is None else counts.used

    # ------------------------------------------------------------------ reports
    @property
    def draining(self) -> frozenset[str]:
        return frozenset(self._draining)

    @property
    def served(self) -> View | None:
        """The snapshot installed last, however stale (what the worker's metrics show)."""
        return self._view

    @property
    def confirmed_at(self) -> datetime | None:
        """When the control plane last confirmed the snapshot served."""
        return self._confirmed_at

    def report(self, sequence: int) -> RuntimeReportBody | None:
        """The full sparse report (every proxy with a connection, parked ones included, or a
        reservation, under its assignment epoch; the rest count zero) naming the ACKed
        snapshot; None before any ACK (a report must name one)."""
        if self._acked is None:
            return None
        entries = tuple(
            ReportEntry(pid, c.epoch, c.active + c.parked, c.reserved)
            for pid, c in sorted(self._counts.items())
            if c.busy
        )
        return RuntimeReportBody(sequence, self._acked.version, self._acked.epoch, entries)
