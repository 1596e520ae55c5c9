"""The ownership manager: one tick decides which proxies each gateway worker holds
(docs/ownership-manager.md has the design; ADR-005 "Worker 所有权" the rules the pool keeps).

A tick runs, in the ADR's order: expire lapsed leases; begin drains (near `usable_until`,
health left AVAILABLE, exit banned for every host, session ended, more held than the worker's
share); acknowledge drains with the worker's last fresh counts (the pool's barrier decides);
renew leases about to lapse; top every live worker up to its share of its group's capacity
from the group's upstreams, the longest usable first, within each upstream's gateway share.
Every step is a pool operation safe to repeat and the manager keeps nothing between ticks, so
a tick cut short leaves nothing the next cannot finish. One tick at a time is the caller's to
ensure (a ``TickLease``); ``keep_going`` is asked between phases, so a tick whose lease was
lost stops there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from activity.clock import Clock
from activity.errors import OwnershipConflict, ScanBudgetExhausted
from activity.holdings import read_holdings
from activity.inspection import LiveWorkers, WorkerStatus
from activity.ports import ControlStore, OutcomeStore, OwnershipRepository, SlotsReader
from activity.types import (
    EVERY_HOST,
    AssignableProxy,
    DrainStatus,
    HeldProxy,
    PoolOptions,
    ProxyState,
    WorkerAssignments,
)


class ManagerPool(OwnershipRepository, ControlStore, SlotsReader, OutcomeStore, Protocol):
    """The ports a tick uses, and the live sessions (PoolInspector's read)."""

    def worker_sessions(self, limit: int) -> LiveWorkers: ...


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A worker group as the operator configured it, resolved to plain values."""

    name: str
    #: Connections to keep assigned to the group's live workers (a proxy counts its max).
    target_capacity: int
    #: The upstreams it may draw from, by name ("all" resolved by the caller).
    upstreams: tuple[str, ...]
    #: Its workers' IDs.
    workers: frozenset[str]


@dataclass(frozen=True, slots=True)
class ManagerPolicy:
    #: With the margin, what lets one manager renew 100,000 held proxies: each is renewed
    #: once per lease_ttl - renew_margin, at most max_renews a tick (docs/PERFORMANCE.md).
    lease_ttl: timedelta = timedelta(seconds=120)
    #: A lease ending within this is renewed.
    renew_margin: timedelta = timedelta(seconds=60)
    #: A proxy usable for less than this is drained; a candidate needs twice it.
    drain_lead: timedelta = timedelta(seconds=30)
    sessions_limit: int = 1_000
    holdings_limit: int = 10_000
    candidates_page: int = 200
    max_assigns: int = 2_000
    #: Renewals a tick starts (a worker's are renewed together, so a tick may finish the
    #: worker it began past this by up to holdings_limit).
    max_renews: int = 5_000
    expire_batch: int = 500
    expire_batches: int = 10
    #: A worker's holdings read (and its proxies' bans) is kept while its holdings revision is
    #: unchanged, and read again past this age (aged_rereads a tick): a change to what it
    #: holds is seen at the next tick, a held proxy's health or ban within this and the ticks
    #: the re-reads take (neither moves the revision).
    view_max_age: timedelta = timedelta(seconds=30)
    #: Holdings reads past view_max_age a tick makes again (the oldest first).
    aged_rereads: int = 20
    #: Proxy IDs one ``quarantine_of`` call asks about: a worker's held proxies' bans are read
    #: in calls of at most this many. At most the pool's ``PoolOptions.max_quarantine_batch``
    #: (which refuses a longer call); a worker may hold up to ``holdings_limit``.
    quarantine_batch: int = PoolOptions().max_quarantine_batch

    def __post_init__(self) -> None:
        if self.quarantine_batch < 1:
            raise ValueError("ManagerPolicy.quarantine_batch must be at least 1")


@dataclass(slots=True)
class GroupTally:
    assigned: int = 0
    renewed: int = 0
    drains_begun: int = 0
    released: int = 0
    #: Candidates another client or worker took between the read and the assign.
    refused: int = 0


@dataclass(slots=True)
class TickReport:
    expired: int = 0
    groups: dict[str, GroupTally] = field(default_factory=dict)
    #: A bound stopped the tick short (more to do next tick), or its lease was lost.
    cut_short: bool = False


@dataclass(slots=True)
class _Worker:
    worker_id: str
    group: GroupConfig
    status: WorkerStatus | None  # None: no live session
    view: WorkerAssignments
    share: int = 0  # connections it should hold
    #: Held proxies' banned hosts (``quarantine_of``), read with the view.
    banned: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _KeptView:
    view: WorkerAssignments
    banned: Mapping[str, frozenset[str]]
    read_at: datetime


def _capacity(held: Iterable[HeldProxy]) -> int:
    return sum(h.max_concurrency for h in held)


class OwnershipManager:
    def __init__(self, pool: ManagerPool, clock: Clock, policy: ManagerPolicy) -> None:
        self._pool = pool
        self._clock = clock
        self._policy = policy
        # The only thing kept between ticks, and only to spare reads: each worker's last
        # holdings read, used again while its revision says nothing it holds has changed
        # (one O(1) read instead of every held record). Losing it (a new process, a crash)
        # costs one full read; a tick never acts on it past view_max_age.
        self._kept: dict[str, _KeptView] = {}

    def tick(
        self,
        groups: Sequence[GroupConfig],
        shares: Mapping[str, float],
        keep_going: Callable[[], bool] = lambda: True,
    ) -> TickReport:
        """One tick over ``groups``; ``shares`` is how much of each upstream the gateway may
        hold (0 to 1 of the upstream's gateway-held and extractable proxies; missing: all)."""
        report = TickReport(groups={g.name: GroupTally() for g in groups})
        now = self._clock.now()
        report.expired, report.cut_short = self._expire(now)
        live = self._pool.worker_sessions(self._policy.sessions_limit)
        report.cut_short |= not live.complete
        statuses = {s.session.worker_id: s for s in live.workers}
        steps: tuple[Callable[[list[_Worker], datetime, TickReport], None], ...] = (
            self._begin_drains,
            self._acknowledge_drains,
            self._renew,
        )
        workers = self._read(groups, statuses, now)
        for step in steps:
            if not keep_going():
                report.cut_short = True
                return report
            step(workers, now, report)
        if not keep_going():
            report.cut_short = True
            return report
        self._top_up(workers, shares, now, report)
        return report

    def _read(
        self, groups: Sequence[GroupConfig], statuses: Mapping[str, WorkerStatus], now: datetime
    ) -> list[_Worker]:
        configured = sorted({w for g in groups for w in g.workers})
        kept = self._holdings(configured, now)
        workers = []
        for group in groups:
            live = sorted(w for w in group.workers if w in statuses)
            part, rest = divmod(group.target_capacity, len(live)) if live else (0, 0)
            for worker_id in sorted(group.workers):
                status = statuses.get(worker_id)
                share = 0
                if status is not None:  # equal parts; the remainder to the first by ID
                    share = part + (1 if live.index(worker_id) < rest else 0)
                one = kept.get(worker_id)
                if one is None:
                    continue  # not read as one this tick (holdings.read_holdings)
                workers.append(_Worker(worker_id, group, status, one.view, share, one.banned))
        return workers

    def _holdings(self, worker_ids: Sequence[str], now: datetime) -> dict[str, _KeptView]:
        """Each worker's holdings: read again when its revision moved since the kept read (a
        change to what it holds), or when the kept read is older than ``view_max_age`` (its
        proxies' health and bans move no revision), the oldest first and at most
        ``aged_rereads`` of those a tick, so a tick never reads every worker at once; the
        rest keep theirs one tick more. A worker whose holdings could not be read as one
        (they kept changing) is left out of this tick: nothing is done for it on a guess."""
        fresh: dict[str, _KeptView] = {}
        aged: list[tuple[datetime, str]] = []
        for worker_id in worker_ids:
            kept = self._kept.get(worker_id)
            if kept is None or self._pool.worker_revision(worker_id).revision != (
                kept.view.revision
            ):
                read = self._read_holdings(worker_id, now)
                if read is not None:
                    fresh[worker_id] = read
            elif now - kept.read_at >= self._policy.view_max_age:
                aged.append((kept.read_at, worker_id))
                fresh[worker_id] = kept
            else:
                fresh[worker_id] = kept
        for _, worker_id in sorted(aged)[: self._policy.aged_rereads]:
            fresh[worker_id] = self._read_holdings(worker_id, now) or fresh[worker_id]
        self._kept = fresh  # bounded by the configured workers
        return fresh

    def _read_holdings(self, worker_id: str, now: datetime) -> _KeptView | None:
        try:
            view = read_holdings(self._pool, worker_id, self._policy.holdings_limit)
        except ScanBudgetExhausted:
            return None
        held, step = sorted(view.held), self._policy.quarantine_batch
        banned: dict[str, frozenset[str]] = {}
        for start in range(0, len(held), step):  # holdings_limit / quarantine_batch calls
            banned.update(self._pool.quarantine_of(held[start : start + step], now))
        return _KeptView(view, banned, now)

    def _expire(self, now: datetime) -> tuple[int, bool]:
        expired = 0
        for _ in range(self._policy.expire_batches):
            batch = self._pool.expire(now, self._policy.expire_batch)
            expired += len(batch)
            if len(batch) < self._policy.expire_batch:
                return expired, False
        return expired, True

    # ------------------------------------------------------------------ drains
    def _to_drain(self, worker: _Worker, now: datetime) -> list[str]:
        """The held proxies to drain: all of an ended session's; those near their end, out of
        health or banned everywhere; then, over the worker's share, the soonest usable."""
        held = worker.view.held
        if worker.status is None:
            return sorted(held)
        banned = worker.banned
        lead = now + self._policy.drain_lead
        drain = [
            pid
            for pid, h in sorted(held.items())
            if h.state is not ProxyState.AVAILABLE
            or h.proxy.usable_until <= lead
            or EVERY_HOST in banned.get(pid, frozenset())
        ]
        kept = sorted(
            (h for pid, h in held.items() if pid not in drain),
            key=lambda h: (h.proxy.usable_until, h.proxy.proxy_id),
        )
        # Only what the share does without: a proxy whose going would leave the worker short
        # stays (else each tick would drain it and the top-up assign another).
        capacity = _capacity(kept)
        for h in kept:
            if capacity - h.max_concurrency >= worker.share:
                drain.append(h.proxy.proxy_id)
                capacity -= h.max_concurrency
        return drain

    def _begin_drains(self, workers: list[_Worker], now: datetime, report: TickReport) -> None:
        """Begin the drains, and leave the drained out of each worker's view: what a drain
        takes out of the pool's worker-owned set, without reading every worker again."""
        for worker in workers:
            epochs = {a.proxy_id: a.epoch for a in worker.view.assignments}
            tally = report.groups[worker.group.name]
            gone = set()
            for pid in self._to_drain(worker, now):
                gone.add(pid)  # drained, or lapsed or released meanwhile: held no more
                try:
                    self._pool.begin_drain(pid, worker.worker_id, epochs[pid])
                except OwnershipConflict:
                    continue
                tally.drains_begun += 1
            if gone:
                view = worker.view
                worker.view = replace(
                    view,
                    assignments=tuple(a for a in view.assignments if a.proxy_id not in gone),
                    held={pid: h for pid, h in view.held.items() if pid not in gone},
                )

    def _acknowledge_drains(
        self, workers: list[_Worker], now: datetime, report: TickReport
    ) -> None:
        for worker in workers:
            runtime = worker.status.runtime if worker.status else None
            if runtime is None:
                continue  # counts unknown: never claim zero for a worker that did not say so
            if worker.status is not None and worker.status.draining == 0:
                continue  # no ticket to read (the session's count, read this tick)
            counts = {e.proxy_id: e for e in runtime.entries}
            tally = report.groups[worker.group.name]
            for ticket in self._pool.drain_tickets(worker.worker_id, self._policy.holdings_limit):
                entry = counts.get(ticket.proxy_id)
                active = reserved = 0  # absent from a sparse report: idle
                if entry is not None and entry.epoch == ticket.assignment_epoch:
                    active, reserved = entry.active, entry.reserved
                try:
                    status = self._pool.acknowledge_drain(
                        ticket.proxy_id,
                        worker.worker_id,
                        ticket.assignment_epoch,
                        active,
                        reserved,
                    )
                except OwnershipConflict:
                    continue
                if status is DrainStatus.RELEASED:
                    tally.released += 1

    def _renew(self, workers: list[_Worker], now: datetime, report: TickReport) -> None:
        """Once any lease of a worker is within the renew margin, all its leases are renewed
        together: its snapshot (which carries every lease) then changes once per lease period,
        not at every tick that renews some proxy, so most of its polls are answered 304."""
        due = now + self._policy.renew_margin
        # Live workers with a lease within the margin (an ended session's proxies drain; their
        # leases may lapse), the soonest lease first; whole workers while the bound lasts.
        owing = sorted(
            (min(a.lease_expires_at for a in w.view.assignments), w.worker_id, w)
            for w in workers
            if w.status is not None and w.view.assignments
        )
        budget = self._policy.max_renews
        for soonest, _, worker in owing:
            if soonest > due:
                break
            if budget <= 0:
                report.cut_short = True
                return
            budget -= len(worker.view.assignments)
            tally = report.groups[worker.group.name]
            for a in worker.view.assignments:
                try:
                    self._pool.renew(
                        now, a.proxy_id, worker.worker_id, a.epoch, self._policy.lease_ttl
                    )
                except OwnershipConflict:
                    continue
                tally.renewed += 1

    # ------------------------------------------------------------------ top-up
    def _top_up(
        self,
        workers: list[_Worker],
        shares: Mapping[str, float],
        now: datetime,
        report: TickReport,
    ) -> None:
        held_by: dict[str, int] = {}
        for worker in workers:
            for h in worker.view.held.values():
                held_by[h.proxy.upstream_id] = held_by.get(h.proxy.upstream_id, 0) + 1
        short = [
            w for w in workers if w.status is not None and w.share > _capacity(w.view.held.values())
        ]
        # Each upstream's room is read only for a tick that has a worker to top up.
        upstreams = sorted({u for w in short for u in w.group.upstreams})
        room = {u: self._room(u, held_by.get(u, 0), shares.get(u, 1.0)) for u in upstreams}
        budget = self._policy.max_assigns
        for worker in short:
            deficit = worker.share - _capacity(worker.view.held.values())
            tally = report.groups[worker.group.name]
            for upstream, candidate in self._candidates(worker.group, room):
                if deficit <= 0:
                    break
                if budget == 0:
                    report.cut_short = True
                    return
                budget -= 1
                try:
                    self._pool.assign(
                        now, candidate.proxy_id, worker.worker_id, self._policy.lease_ttl
                    )
                except OwnershipConflict:
                    tally.refused += 1
                    continue
                tally.assigned += 1
                deficit -= candidate.max_concurrency
                room[upstream] -= 1

    def _room(self, upstream: str, held: int, share: float) -> int:
        """How many more proxies the gateway may take of ``upstream``: held stays within
        ``share`` of held and extractable together (0 when it cannot be counted now: more
        expired records than one read cleans). ``extractable`` is a count, not a scan, so an
        upstream of any size gets its room (``upstream_inventory`` refuses one over the scan
        budget, and sums slots the room does not need)."""
        try:
            extractable = self._pool.extractable(upstream)
        except ScanBudgetExhausted:
            return 0
        allowed = int(share * (held + extractable))
        return max(0, allowed - held)

    def _candidates(
        self, group: GroupConfig, room: Mapping[str, int]
    ) -> Iterator[tuple[str, AssignableProxy]]:
        """The group's candidates with their upstream, the upstreams in turn, each while it
        has room (``room`` is read as it is spent)."""
        remaining = 2 * self._policy.drain_lead
        pages = {
            u: iter(self._pool.assignable(u, self._policy.candidates_page, remaining).proxies)
            for u in group.upstreams
            if room.get(u, 0) > 0
        }
        while pages:
            for u in list(pages):
                if room.get(u, 0) <= 0:
                    del pages[u]
                    continue
                candidate = next(pages[u], None)
                if candidate is None:
                    del pages[u]
                    continue
                yield u, candidate
