"""Every table of one MemoryPool and the lock that makes each port call one atomic step.

The tables mirror the Redis keyspace (records, unique keys, expiry and AVAILABLE indexes,
owners, drain tickets, sessions, runtime, replays, outcomes, quarantine, quota counters) so both
implementations scan the same members in the same order and the differential test can demand
identical answers. The methods here are the ones more than one port family needs: the clocks,
the bookkeeping that keeps counters and indexes derived from the records (``tracking``, the
Python twin of lua/lib/records.lua's ``track_begin``/``track_end``), deletion and bounded
cleaning, replays, leases, and the live session and runtime of a worker.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from activity import _quota
from activity._checks import aware_ms
from activity._zset import ZSet
from activity.clock import Clock
from activity.credentials import CredentialResolver
from activity.errors import IdempotencyConflict, ScanBudgetExhausted
from activity.labels import label_key
from activity.memory._records import (
    TERMINAL,
    Owner,
    Record,
    Replay,
    Runtime,
    Session,
    StoredOutcome,
    Ticket,
)
from activity.types import MANAGED_STATES, ExpiredTally, PoolOptions, ProxyState

_K = TypeVar("_K", str, tuple[str, str])
#: States an idle proxy is rechecked in (``take_due_checks``): the pair of lua/lib/records.lua's
#: RECHECKED.
RECHECKED = (ProxyState.AVAILABLE, ProxyState.SUSPECT)
#: States an indexed record may be handed out for a check in (RECHECKED, and FETCHED: new,
#: unchecked); the pair of lua/take_due_checks.lua's TAKEABLE.
TAKEABLE = (*RECHECKED, ProxyState.FETCHED)
#: Quota counters kept before the ones two windows old are first dropped (Redis expires them).
MAX_QUOTA_COUNTERS = 10_000


# No repr: the records hold proxy passwords, and a repr is what ends up in a log line.
@dataclass(eq=False, repr=False, slots=True)
class PoolState:
    """The tables, the lock and the clocks; each port family reads and writes them under ``lock``.

    ``clock`` is the caller's time (proxy TTLs, health freshness, extract); ``server_clock``
    stands for Redis server time (session and report TTLs).
    """

    options: PoolOptions
    clock: Clock
    server_clock: Clock
    credentials: CredentialResolver
    #: Reentrant: a family's public call may run another family's helper under the same lock.
    lock: threading.RLock = field(default_factory=threading.RLock)
    records: dict[str, Record] = field(default_factory=dict)
    unique: dict[str, str] = field(default_factory=dict)  # unique key digest -> proxy ID
    expiry: ZSet = field(default_factory=ZSet)  # proxy ID -> hard expiry ms
    upstream_expiry: dict[str, ZSet] = field(default_factory=dict)
    #: Unassigned AVAILABLE proxies by usable_until: ("available", ""), (dimension, value).
    indexes: dict[tuple[str, str], ZSet] = field(default_factory=dict)
    inventory: dict[str, int] = field(default_factory=dict)  # upstream -> unextracted records
    managed: dict[str, int] = field(default_factory=dict)  # upstream -> MANAGED_STATES records
    owners: dict[str, Owner] = field(default_factory=dict)
    #: (upstream, used) -> records removed at expiry since the last sweep took the tally.
    expired_tally: Counter[tuple[str, bool]] = field(default_factory=Counter)
    owner_expiry: ZSet = field(default_factory=ZSet)  # proxy ID -> lease end ms
    owned: dict[str, ZSet] = field(default_factory=dict)  # upstream -> assigned AVAILABLE
    #: upstream -> proxies to check again (take_due_checks): unassigned AVAILABLE and SUSPECT
    #: ones by last check, new ones by fetch time, re-scored when taken or examined; leftovers
    #: of records that left those states go lazily (lua/lib/records.lua has the same)
    checkable: dict[str, ZSet] = field(default_factory=dict)
    worker_owned: dict[str, ZSet] = field(default_factory=dict)  # worker -> leases not draining
    tickets: dict[str, Ticket] = field(default_factory=dict)  # proxy ID -> its drain ticket
    worker_draining: dict[str, ZSet] = field(default_factory=dict)  # worker -> ticket epochs
    #: worker -> holdings revision (bump_revision). Never dropped: a revision must not start
    #: again under a worker; one int per worker ID that ever held a proxy (the fleet's).
    revisions: dict[str, int] = field(default_factory=dict)
    epoch: int = 0
    generation: int = 0  # of worker sessions
    #: The pool generation (ExtractResult.generation): a MemoryPool never loses its data.
    pool_generation: str = field(default_factory=lambda: secrets.token_hex(8))
    sessions: dict[str, Session] = field(default_factory=dict)
    session_expiry: ZSet = field(default_factory=ZSet)
    runtime: dict[str, Runtime] = field(default_factory=dict)
    runtime_expiry: ZSet = field(default_factory=ZSet)
    replays: dict[tuple[str, str], Replay] = field(default_factory=dict)
    replay_expiry: ZSet = field(default_factory=ZSet)  # "<kind>:<digest>" -> expiry ms
    # Outcome reports live with their record; quarantines of exits outlive it.
    outcomes: dict[str, StoredOutcome] = field(default_factory=dict)
    quarantine: dict[str, dict[str, int]] = field(default_factory=dict)  # exit -> host -> until
    quarantine_expiry: ZSet = field(default_factory=ZSet)  # "<exit digest>|<host>" -> until ms
    #: Passive health, also by exit (members "<digest>|#" and "<digest>|!" of
    #: quarantine_expiry): failures counted in a window (count, window end ms), suspect until.
    strikes: dict[str, tuple[int, int]] = field(default_factory=dict)
    suspects: dict[str, int] = field(default_factory=dict)
    #: CallQuota counters: (client, "calls"/"proxies", limit, window ms) -> window.
    quotas: dict[tuple[str, str, int, int], _quota.Window] = field(default_factory=dict)
    quota_prune_at: int = MAX_QUOTA_COUNTERS

    # ------------------------------------------------------------------ time
    def now(self) -> int:
        return aware_ms(self.clock.now(), "clock")

    def server_now(self) -> int:
        return aware_ms(self.server_clock.now(), "server clock")

    # ------------------------------------------------------------------ indexes and counters
    def index(self, name: tuple[str, str]) -> ZSet:
        return self.indexes.get(name) or ZSet()

    def _effective_state(self, rec: Record) -> ProxyState:
        owner = self.owners.get(rec.proxy_id)
        if owner is not None and owner.draining:
            return ProxyState.DRAINING
        return rec.state

    def _flags(self, rec: Record | None) -> tuple[bool, bool]:
        """(counts toward inventory, counts toward managed)"""
        if rec is None:
            return False, False
        return rec.state not in TERMINAL, self._effective_state(rec) in MANAGED_STATES

    @contextmanager
    def tracking(self, rec: Record, *, keep_checks: bool = False) -> Iterator[None]:
        """Keep counters and indexes derived from the record, whatever the block changes.

        Every state, ownership or expiry change of a proxy goes through here, so inventory,
        managed and index membership cannot disagree with the records. ``keep_checks``
        (extract only) leaves the record's ``checkable`` entry, as lua/lib/records.lua's
        ``track_begin`` does on the hot path: ``take_due_checks`` or ``delete`` removes it.
        Only the entry the end of the block would put back is removed at its start (the same
        sets as Lua's, whose bracket removes exactly that).
        """
        stored = self.records.get(rec.proxy_id) is rec
        inv_before, managed_before = self._flags(rec if stored else None)
        upstream = rec.upstream_id
        for name in _index_names(rec):
            zrem(self.indexes, name, rec.proxy_id)
        zrem(self.owned, upstream, rec.proxy_id)
        # As lua/lib/records.lua's track_begin: only the entry track_end below would put back
        # (an unchecked record keeps its fetch-time entry; other leftovers go lazily).
        owner = self.owners.get(rec.proxy_id)
        checked = owner is None and rec.state in RECHECKED and rec.checked_ms is not None
        if stored and checked and not keep_checks:
            zrem(self.checkable, upstream, rec.proxy_id)
        yield
        alive = self.records.get(rec.proxy_id) is rec
        inv_after, managed_after = self._flags(rec if alive else None)
        _bump(self.inventory, upstream, int(inv_after) - int(inv_before))
        _bump(self.managed, upstream, int(managed_after) - int(managed_before))
        if not alive:
            return
        # Membership ignores the clock: every read filters by score (usable_until > now), so
        # index contents never depend on which caller's clock touched the record last.
        owner = self.owners.get(rec.proxy_id)
        eligible = rec.state is ProxyState.AVAILABLE
        if eligible and owner is None:
            for name in _index_names(rec):
                zadd(self.indexes, name, rec.proxy_id, rec.usable_ms)
        elif eligible and owner is not None and not owner.draining:
            zadd(self.owned, upstream, rec.proxy_id, rec.usable_ms)
        if owner is None and rec.state in RECHECKED and rec.checked_ms is not None:
            zadd(self.checkable, upstream, rec.proxy_id, rec.checked_ms)

    # ------------------------------------------------------------------ deletion and cleaning
    def delete(self, rec: Record) -> None:
        pid = rec.proxy_id
        with self.tracking(rec):
            del self.records[pid]
            if self.unique.get(rec.key_digest) == pid:
                del self.unique[rec.key_digest]
            self.expiry.remove(pid)
            zrem(self.upstream_expiry, rec.upstream_id, pid)
            self.drop_owner(pid)
            self.outcomes.pop(pid, None)
            zrem(self.checkable, rec.upstream_id, pid)  # whatever tracking left there

    def drop_owner(self, pid: str) -> Owner | None:
        owner = self.owners.pop(pid, None)
        if owner is None:
            return None
        if not owner.draining:  # a draining one is out of the snapshot already
            self.bump_revision(owner.worker_id)
        self.owner_expiry.remove(pid)
        zrem(self.worker_owned, owner.worker_id, pid)
        ticket = self.tickets.pop(pid, None)
        if ticket is not None:
            zrem(self.worker_draining, ticket.worker_id, pid)
        return owner

    def clean_expired(
        self, now_ms: int, limit: int, expiry: ZSet | None = None
    ) -> tuple[int, bool]:
        """Remove up to ``limit`` records past their hard expiry; (removed, more remain).

        ``expiry`` is the global expiry index, or one upstream's when a read must be exact for
        that upstream only (other upstreams' backlog never makes it fail).
        """
        due = (self.expiry if expiry is None else expiry).at_most(now_ms, limit + 1)
        for pid in due[:limit]:
            self.expire(self.records[pid])
        self._purge_replays(now_ms)
        return min(len(due), limit), len(due) > limit

    def expire(self, rec: Record) -> None:
        """Remove a record past its hard expiry, tallied by upstream as used (extracted, or
        assigned to a worker) or never used. Every removal at expiry goes through here, or the
        waste figures undercount (expire_rec in lua/lib/sweep.lua is the pair)."""
        used = rec.state is ProxyState.EXTRACTED or rec.proxy_id in self.owners
        self.expired_tally[(rec.upstream_id, used)] += 1
        self.delete(rec)

    def take_expired_tally(self) -> dict[str, ExpiredTally]:
        """The records removed at expiry since the last call, by upstream; the tally restarts."""
        taken: dict[str, ExpiredTally] = {}
        for upstream in sorted({u for u, _ in self.expired_tally}):
            tally = self.expired_tally
            taken[upstream] = ExpiredTally(tally[(upstream, True)], tally[(upstream, False)])
        self.expired_tally.clear()
        return taken

    def clean_for_read(self, upstream_id: str, now_ms: int) -> None:
        """Reads that must be exact first clean what expired; too much to clean fails closed."""
        expiry = self.upstream_expiry.get(upstream_id) or ZSet()
        _, more = self.clean_expired(now_ms, self.options.scan_budget, expiry)
        if more:
            raise ScanBudgetExhausted("more expired records than one scan may clean; sweep first")

    # ------------------------------------------------------------------ replays
    def _purge_replays(self, now_ms: int) -> None:
        # Redis drops these by key TTL; here each call drops a bounded number of due entries,
        # at least as many as one call can create, so the store stays bounded by the TTLs.
        for kind_digest in self.replay_expiry.at_most(now_ms, self.options.clean_budget):
            self.replay_expiry.remove(kind_digest)
            kind, _, digest = kind_digest.partition(":")
            self.replays.pop((kind, digest), None)

    def store_replay(
        self, kind: str, digest: str, request_digest: str, value: object, expires_ms: int
    ) -> None:
        self.replays[(kind, digest)] = Replay(request_digest, expires_ms, value)
        self.replay_expiry.add(f"{kind}:{digest}", expires_ms)

    def replayed(self, kind: str, digest: str, request_digest: str, now_ms: int) -> object:
        stored = self.replays.get((kind, digest))
        if stored is None or stored.expires_ms <= now_ms:
            return None
        if stored.request_digest != request_digest:
            raise IdempotencyConflict("this key was used before with a different request")
        return stored.value

    # ------------------------------------------------------------------ leases and sessions
    def bump_revision(self, worker_id: str) -> None:
        """One more on the worker's holdings revision (docs/activity-pool.md "Holdings
        revision"): every change to one of its assignments not draining (what its snapshot
        holds) and every rewrite of a record it holds without draining. The changes come
        through ``set_lease``, ``drop_owner``, ``Ownership.begin_drain`` and
        ``Upserts._upsert_one``'s refresh only, as in Lua (``bump_revision`` in
        lua/lib/ownership_drain.lua), so both count alike."""
        self.revisions[worker_id] = self.revisions.get(worker_id, 0) + 1

    def set_lease(self, proxy_id: str, owner: Owner, lease_ms: int) -> None:
        owner.lease_ms = lease_ms
        if not owner.draining:  # a draining one's lease is in no snapshot
            self.bump_revision(owner.worker_id)
        self.owner_expiry.add(proxy_id, lease_ms)
        if not owner.draining:
            zadd(self.worker_owned, owner.worker_id, proxy_id, lease_ms)

    def live_session(self, worker_id: str) -> Session | None:
        session = self.sessions.get(worker_id)
        if session is None or session.expires_ms <= self.server_now():
            return None
        return session

    def fresh_runtime(self, worker_id: str) -> Runtime | None:
        session = self.live_session(worker_id)
        runtime = self.runtime.get(worker_id)
        if session is None or runtime is None or runtime.session_id != session.session_id:
            return None
        if runtime.expires_ms <= self.server_now():
            return None
        return runtime


def _index_names(rec: Record) -> list[tuple[str, str]]:
    names = [("available", ""), ("upstream", rec.upstream_id), ("protocol", rec.protocol)]
    if rec.region is not None:
        names.append(("region", label_key(rec.region)))
    if rec.carrier is not None:
        names.append(("carrier", label_key(rec.carrier)))
    return names


def zadd(table: dict[_K, ZSet], key: _K, member: str, score: int) -> None:
    table.setdefault(key, ZSet()).add(member, score)


def zrem(table: dict[_K, ZSet], key: _K, member: str) -> None:
    zset = table.get(key)
    if zset is not None and zset.remove(member) and not zset:
        del table[key]  # empty sets vanish, as in Redis


def _bump(table: dict[str, int], key: str, delta: int) -> None:
    if delta:
        value = table.get(key, 0) + delta
        if value:
            table[key] = value
        else:
            table.pop(key, None)
