"""MemoryPool: the reference semantics of ADR-005, in one process.

Every port of the activity pool, thread safe (one lock: each public call is one atomic step, as
each Lua script is in Redis), with an injectable clock and the same bounds as RedisPool. The
data layout deliberately mirrors the Redis keyspace (records, unique keys, expiry and AVAILABLE
indexes, owners, drain tickets, sessions, runtime) so both implementations scan the same members
in the same order and the differential test can demand identical answers.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from activity import _quota
from activity import _validation as v
from activity._time import from_ms, span_ms
from activity._zset import ZSet
from activity.clock import Clock, SystemClock
from activity.credentials import CredentialResolver, NoCredentials
from activity.deadline import check_deadline
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    InvalidBatch,
    OutcomeRejected,
    OwnershipConflict,
    QuotaExceeded,
    ReportRejected,
    ScanBudgetExhausted,
    SessionExpired,
    SessionFenced,
    SnapshotRejected,
)
from activity.types import (
    EVERY_HOST,
    MANAGED_STATES,
    Assignment,
    CallQuota,
    DrainStatus,
    DrainTicket,
    ExtractedProxy,
    ExtractMode,
    ExtractRequest,
    ExtractResult,
    FetchedBatch,
    HealthResult,
    HealthUpdate,
    Outcome,
    OutcomeReport,
    OutcomeResult,
    PoolOptions,
    ProxyState,
    ReportResult,
    RuntimeEntry,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    SweepResult,
    UpsertResult,
    UpstreamInventory,
    WorkerAssignments,
    WorkerSession,
)

_K = TypeVar("_K", str, tuple[str, str])
#: Quota counters kept before the ones two windows old are first dropped (Redis expires them).
_MAX_QUOTA_COUNTERS = 10_000
_TERMINAL = (ProxyState.EXTRACTED, ProxyState.REMOVED)
_MAX_REPORTED_IDS = 20  # a rejected report names at most this many offending proxies


@dataclass(slots=True)
class _Record:
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
    password: str | None
    labels: tuple[tuple[str, str], ...]
    state: ProxyState = ProxyState.FETCHED
    checked_ms: int | None = None
    success_ms: int | None = None
    latency_ms: int | None = None
    failure_reason: str | None = None
    extracted_by: str | None = None


@dataclass(frozen=True, slots=True)
class _Outcome:
    outcome: Outcome
    host: str | None
    #: The quarantine end this report set (or kept, when a longer one stood), or None.
    until_ms: int | None


@dataclass(slots=True)
class _Owner:
    worker_id: str
    epoch: int
    lease_ms: int
    draining: bool = False

    def view(self, proxy_id: str) -> Assignment:
        return Assignment(
            proxy_id, self.worker_id, self.epoch, from_ms(self.lease_ms), self.draining
        )


@dataclass(slots=True)
class _Ticket:
    worker_id: str
    assignment_epoch: int
    required_epoch: int
    snapshot: SnapshotRef | None = None
    generation: int | None = None  # the session generation the snapshot was issued to


@dataclass(slots=True)
class _Session:
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
class _Runtime:
    session_id: str
    sequence: int
    snapshot_version: int
    epoch: int
    entries: dict[str, RuntimeEntry]
    expires_ms: int


@dataclass(slots=True)
class _Replay:
    request_digest: str
    expires_ms: int
    value: object = field(repr=False)


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
        self._clock = clock or SystemClock()
        self._server_clock = server_clock or self._clock
        self._credentials = credentials or NoCredentials()
        self._lock = threading.RLock()
        self._records: dict[str, _Record] = {}
        self._unique: dict[str, str] = {}
        self._expiry = ZSet()
        self._upstream_expiry: dict[str, ZSet] = {}
        self._indexes: dict[tuple[str, str], ZSet] = {}
        self._inventory: dict[str, int] = {}
        self._managed: dict[str, int] = {}
        self._owners: dict[str, _Owner] = {}
        self._owner_expiry = ZSet()
        self._owned: dict[str, ZSet] = {}
        self._worker_owned: dict[str, ZSet] = {}
        self._tickets: dict[str, _Ticket] = {}
        self._worker_draining: dict[str, ZSet] = {}
        self._epoch = 0
        self._generation = 0
        self._sessions: dict[str, _Session] = {}
        self._session_expiry = ZSet()
        self._runtime: dict[str, _Runtime] = {}
        self._runtime_expiry = ZSet()
        self._replays: dict[tuple[str, str], _Replay] = {}
        self._replay_expiry = ZSet()
        # Outcome reports live with their record; quarantines of exits outlive it.
        self._outcomes: dict[str, _Outcome] = {}
        self._quarantine: dict[str, dict[str, int]] = {}  # exit digest -> host -> until ms
        self._quarantine_expiry = ZSet()  # "<exit digest>|<host>" -> until ms
        # CallQuota counters: (client, "calls"/"proxies", limit, window ms) -> window.
        self._quotas: dict[tuple[str, str, int, int], _quota.Window] = {}
        self._quota_prune_at = _MAX_QUOTA_COUNTERS

    # ------------------------------------------------------------------ time
    def _now(self) -> int:
        return v.aware_ms(self._clock.now(), "clock")

    def _server_now(self) -> int:
        return v.aware_ms(self._server_clock.now(), "server clock")

    # ------------------------------------------------------------------ indexes and counters
    @staticmethod
    def _index_names(rec: _Record) -> list[tuple[str, str]]:
        names = [("available", ""), ("upstream", rec.upstream_id), ("protocol", rec.protocol)]
        if rec.region is not None:
            names.append(("region", rec.region))
        if rec.carrier is not None:
            names.append(("carrier", rec.carrier))
        return names

    def _index(self, name: tuple[str, str]) -> ZSet:
        return self._indexes.get(name) or ZSet()

    @staticmethod
    def _zadd(table: dict[_K, ZSet], key: _K, member: str, score: int) -> None:
        table.setdefault(key, ZSet()).add(member, score)

    @staticmethod
    def _zrem(table: dict[_K, ZSet], key: _K, member: str) -> None:
        zset = table.get(key)
        if zset is not None and zset.remove(member) and not zset:
            del table[key]  # empty sets vanish, as in Redis

    def _effective_state(self, rec: _Record) -> ProxyState:
        owner = self._owners.get(rec.proxy_id)
        if owner is not None and owner.draining:
            return ProxyState.DRAINING
        return rec.state

    def _flags(self, rec: _Record | None) -> tuple[bool, bool]:
        """(counts toward inventory, counts toward managed)"""
        if rec is None:
            return False, False
        return rec.state not in _TERMINAL, self._effective_state(rec) in MANAGED_STATES

    @contextmanager
    def _tracking(self, rec: _Record) -> Iterator[None]:
        """Keep counters and indexes derived from the record, whatever the block changes.

        Every state, ownership or expiry change of a proxy goes through here, so inventory,
        managed and index membership cannot disagree with the records.
        """
        stored = self._records.get(rec.proxy_id) is rec
        inv_before, managed_before = self._flags(rec if stored else None)
        upstream = rec.upstream_id
        for name in self._index_names(rec):
            self._zrem(self._indexes, name, rec.proxy_id)
        self._zrem(self._owned, upstream, rec.proxy_id)
        yield
        alive = self._records.get(rec.proxy_id) is rec
        inv_after, managed_after = self._flags(rec if alive else None)
        self._bump(self._inventory, upstream, int(inv_after) - int(inv_before))
        self._bump(self._managed, upstream, int(managed_after) - int(managed_before))
        if not alive:
            return
        # Membership ignores the clock: every read filters by score (usable_until > now), so
        # index contents never depend on which caller's clock touched the record last.
        owner = self._owners.get(rec.proxy_id)
        eligible = rec.state is ProxyState.AVAILABLE
        if eligible and owner is None:
            for name in self._index_names(rec):
                self._zadd(self._indexes, name, rec.proxy_id, rec.usable_ms)
        elif eligible and owner is not None and not owner.draining:
            self._zadd(self._owned, upstream, rec.proxy_id, rec.usable_ms)

    @staticmethod
    def _bump(table: dict[str, int], key: str, delta: int) -> None:
        if delta:
            value = table.get(key, 0) + delta
            if value:
                table[key] = value
            else:
                table.pop(key, None)

    # ------------------------------------------------------------------ deletion and cleaning
    def _delete(self, rec: _Record) -> None:
        pid = rec.proxy_id
        with self._tracking(rec):
            del self._records[pid]
            if self._unique.get(rec.key_digest) == pid:
                del self._unique[rec.key_digest]
            self._expiry.remove(pid)
            self._zrem(self._upstream_expiry, rec.upstream_id, pid)
            self._drop_owner(pid)
            self._outcomes.pop(pid, None)

    def _drop_owner(self, pid: str) -> _Owner | None:
        owner = self._owners.pop(pid, None)
        if owner is None:
            return None
        self._owner_expiry.remove(pid)
        self._zrem(self._worker_owned, owner.worker_id, pid)
        ticket = self._tickets.pop(pid, None)
        if ticket is not None:
            self._zrem(self._worker_draining, ticket.worker_id, pid)
        return owner

    def _clean_expired(
        self, now_ms: int, limit: int, expiry: ZSet | None = None
    ) -> tuple[int, bool]:
        """Remove up to ``limit`` records past their hard expiry; (removed, more remain).

        ``expiry`` is the global expiry index, or one upstream's when a read must be exact for
        that upstream only (other upstreams' backlog never makes it fail).
        """
        due = (self._expiry if expiry is None else expiry).at_most(now_ms, limit + 1)
        for pid in due[:limit]:
            self._delete(self._records[pid])
        self._purge_replays(now_ms)
        return min(len(due), limit), len(due) > limit

    def _clean_for_read(self, upstream_id: str, now_ms: int) -> None:
        """Reads that must be exact first clean what expired; too much to clean fails closed."""
        expiry = self._upstream_expiry.get(upstream_id) or ZSet()
        _, more = self._clean_expired(now_ms, self.options.scan_budget, expiry)
        if more:
            raise ScanBudgetExhausted("more expired records than one scan may clean; sweep first")

    def _purge_replays(self, now_ms: int) -> None:
        # Redis drops these by key TTL; here each call drops a bounded number of due entries,
        # at least as many as one call can create, so the store stays bounded by the TTLs.
        for kind_digest in self._replay_expiry.at_most(now_ms, self.options.clean_budget):
            self._replay_expiry.remove(kind_digest)
            kind, _, digest = kind_digest.partition(":")
            self._replays.pop((kind, digest), None)

    def _store_replay(self, kind: str, digest: str, request_digest: str, value: object,
                      expires_ms: int) -> None:  # fmt: skip
        self._replays[(kind, digest)] = _Replay(request_digest, expires_ms, value)
        self._replay_expiry.add(f"{kind}:{digest}", expires_ms)

    def _replayed(self, kind: str, digest: str, request_digest: str, now_ms: int) -> object:
        stored = self._replays.get((kind, digest))
        if stored is None or stored.expires_ms <= now_ms:
            return None
        if stored.request_digest != request_digest:
            raise IdempotencyConflict("this key was used before with a different request")
        return stored.value

    # ------------------------------------------------------------------ Upserter
    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        with self._lock:
            now = self._now()
            prepared = v.prepare_batch(batch, self.options, self._credentials, now)
            check_deadline()
            op = None
            if batch.operation_id is not None:
                op = v.digest("op-upsert", prepared.upstream_id, batch.operation_id)
                stored = self._replayed("op", op, prepared.content_digest, now)
                if isinstance(stored, UpsertResult):
                    return dataclasses.replace(stored, replayed=True)
            counts = Counter[str]()
            # Chunks of script_batch_cap input positions, each starting with its own bounded
            # clean, exactly as RedisPool runs one call per chunk: the counts agree.
            for chunk in prepared.chunks(self.options.script_batch_cap):
                self._upsert_chunk(prepared, chunk, now, counts)
            result = UpsertResult(
                inserted=counts["inserted"],
                refreshed=counts["refreshed"],
                dropped=prepared.dropped,
                conflicts=counts["conflicts"],
                skipped_terminal=counts["skipped_terminal"],
                over_capacity=counts["over_capacity"],
                cleaned=counts["cleaned"],
                quarantined=counts["quarantined"],
            )
            if op is not None:
                expires = now + span_ms(self.options.operation_ttl)
                self._store_replay("op", op, prepared.content_digest, result, expires)
            return result

    def _upsert_chunk(
        self,
        batch: v.PreparedBatch,
        chunk: Sequence[v.PreparedProxy],
        now: int,
        counts: Counter[str],
    ) -> None:
        counts["cleaned"] += self._clean_expired(now, self.options.clean_budget)[0]
        upstream = batch.upstream_id
        if self._inventory.get(upstream, 0) + len(chunk) > batch.max_size:
            # max_size is about live stock: the upstream's own expired records must not hold
            # places. Bounded by the scan budget; beyond it the limit errs on the safe side.
            expiry = self._upstream_expiry.get(upstream) or ZSet()
            counts["cleaned"] += self._clean_expired(now, self.options.scan_budget, expiry)[0]
        for cand in chunk:
            self._upsert_one(batch, cand, now, counts)

    def _upsert_one(
        self, batch: v.PreparedBatch, cand: v.PreparedProxy, now: int, counts: Counter[str]
    ) -> None:
        """One candidate of ADR-005's six upsert steps."""
        holder_id = self._unique.get(cand.key_digest)
        for pid in (holder_id, cand.proxy_id):
            rec = self._records.get(pid) if pid is not None else None
            if rec is not None and rec.expires_ms <= now:
                self._delete(rec)  # an expired incumbent never blocks a new lifecycle
                counts["cleaned"] += 1
        holder_id = self._unique.get(cand.key_digest)
        rec = self._records.get(cand.proxy_id)
        if rec is None:
            if holder_id is not None:
                counts["conflicts"] += 1  # the exit is already held under another proxy ID
            elif self._quarantined(cand.key_digest, EVERY_HOST, now):
                counts["quarantined"] += 1  # a banned exit is not taken again for a while
            elif self._inventory.get(batch.upstream_id, 0) >= batch.max_size:
                counts["over_capacity"] += 1
            else:
                self._insert(batch, cand)
                counts["inserted"] += 1
        elif rec.key_digest != cand.key_digest or rec.upstream_id != batch.upstream_id:
            counts["conflicts"] += 1  # the incumbent (ID and upstream) keeps its lifecycle
        elif rec.state in _TERMINAL:
            counts["skipped_terminal"] += 1  # EXTRACTED never re-enters by refresh
        else:
            with self._tracking(rec):
                _apply_candidate(rec, cand)
                self._set_expiry(rec)
                owner = self._owners.get(rec.proxy_id)
                if owner is not None and owner.lease_ms > rec.usable_ms:
                    self._set_lease(rec.proxy_id, owner, rec.usable_ms)  # lease <= usable_until
            counts["refreshed"] += 1

    def _set_expiry(self, rec: _Record) -> None:
        self._expiry.add(rec.proxy_id, rec.expires_ms)
        self._zadd(self._upstream_expiry, rec.upstream_id, rec.proxy_id, rec.expires_ms)

    def _insert(self, batch: v.PreparedBatch, cand: v.PreparedProxy) -> None:
        rec = _Record(
            proxy_id=cand.proxy_id,
            upstream_id=batch.upstream_id,
            key_digest=cand.key_digest,
            host=cand.host,
            port=cand.port,
            protocol=cand.protocol,
            region=cand.region,
            carrier=cand.carrier,
            max_concurrency=cand.max_concurrency,
            expires_ms=cand.expires_ms,
            usable_ms=cand.usable_ms,
            fetched_ms=batch.fetched_ms,
            username=cand.username,
            password=cand.password,
            labels=cand.labels,
        )
        with self._tracking(rec):  # absent on entry: the insert is counted on exit
            self._records[rec.proxy_id] = rec
        self._unique[cand.key_digest] = cand.proxy_id
        self._set_expiry(rec)

    # ------------------------------------------------------------------ HealthStore
    def apply_health(self, updates: Sequence[HealthUpdate]) -> HealthResult:
        with self._lock:
            now = self._now()
            prepared = v.prepare_health(updates, self.options, now)
            check_deadline()
            self._clean_expired(now, self.options.clean_budget)
            applied = missing = ignored = stale = 0
            for upd in prepared:
                rec = self._records.get(upd.proxy_id)
                if rec is None or rec.expires_ms <= now:
                    missing += 1
                elif rec.state in _TERMINAL:
                    ignored += 1
                elif rec.checked_ms is not None and upd.checked_ms < rec.checked_ms:
                    stale += 1
                else:
                    with self._tracking(rec):
                        rec.state = upd.state
                        rec.checked_ms = upd.checked_ms
                        rec.latency_ms = upd.latency_ms
                        if upd.state is ProxyState.AVAILABLE:
                            rec.success_ms = upd.checked_ms
                            rec.failure_reason = None
                        elif upd.failure_reason is not None:
                            rec.failure_reason = upd.failure_reason
                    applied += 1
            return HealthResult(applied=applied, missing=missing, ignored=ignored, stale=stale)

    # ------------------------------------------------------------------ InventoryReader
    def inventory(self, upstream_id: str) -> int:
        v.token(upstream_id, "upstream_id")
        with self._lock:
            check_deadline()
            self._clean_for_read(upstream_id, self._now())
            return self._inventory.get(upstream_id, 0)

    # ------------------------------------------------------------------ ExtractionStore
    def extract(self, request: ExtractRequest) -> ExtractResult:
        prepared = v.prepare_extract(request, self.options)
        with self._lock:
            check_deadline()
            now = self._now()
            kind, digest = prepared.replay_kind, prepared.replay_digest
            quota = prepared.quota
            stored: object = None
            conflict: IdempotencyConflict | None = None
            if kind is not None and digest is not None:
                try:
                    stored = self._replayed(kind, digest, prepared.request_digest, now)
                except IdempotencyConflict as exc:
                    conflict = exc
            if quota is not None:  # every call takes its unit: a replay's, a conflict's too
                self._take_quota(prepared.client_id, quota, "calls", now, 1)
            if conflict is not None:
                raise conflict
            if isinstance(stored, ExtractResult):  # a replay hands out no new proxy
                return ExtractResult(stored.proxies, stored.requested, replayed=True)
            if quota is not None:  # count more must fit; only what is returned is charged
                self._quota_room(prepared.client_id, quota, "proxies", now, prepared.count)
            self._clean_expired(now, self.options.clean_budget)
            selected = self._select(prepared, now)
            proxies = []
            for rec in selected:
                with self._tracking(rec):
                    rec.state = ProxyState.EXTRACTED
                    rec.extracted_by = prepared.client_id
                proxies.append(_extracted(rec))
            result = ExtractResult(tuple(proxies), prepared.count)
            if quota is not None and proxies:
                self._take_quota(prepared.client_id, quota, "proxies", now, len(proxies))
            if kind is not None and digest is not None:
                expires = now + prepared.replay_ttl_ms
                if selected:  # a replay must never outlive a proxy it returns
                    expires = min(expires, min(rec.expires_ms for rec in selected))
                self._store_replay(kind, digest, prepared.request_digest, result, expires)
            return result

    # ------------------------------------------------------------------ CallCounter
    def charge_call(self, client_id: str, quota: CallQuota) -> None:
        client, prepared = v.prepare_charge(client_id, quota, self.options)
        with self._lock:
            check_deadline()
            self._take_quota(client, prepared, "calls", self._now(), 1)

    def _quota_counter(
        self, client: str, quota: v.PreparedQuota, limit: str
    ) -> tuple[tuple[str, str, int, int], int, int]:
        if limit == "calls":
            units, window = quota.calls, quota.call_window_ms
        else:
            units, window = quota.proxies, quota.proxy_window_ms
        return (client, limit, units, window), units, window

    def _quota_room(
        self, client: str, quota: v.PreparedQuota, limit: str, now: int, cost: int
    ) -> _quota.Window:
        """The counter with ``cost`` more units, or ``QuotaExceeded`` (nothing stored)."""
        key, units, window = self._quota_counter(client, quota, limit)
        after = _quota.take(self._quotas.get(key), now, units, window, cost)
        if isinstance(after, _quota.Refusal):
            raise QuotaExceeded(
                f"quota_exceeded: {limit}",
                reason=limit,
                retry_after_ms=after.wait_ms,
                left=after.left,
            )
        return after

    def _take_quota(
        self, client: str, quota: v.PreparedQuota, limit: str, now: int, cost: int
    ) -> None:
        key = self._quota_counter(client, quota, limit)[0]
        self._quotas[key] = self._quota_room(client, quota, limit, now, cost)
        if len(self._quotas) > self._quota_prune_at:
            # Drop counters that no longer count (two windows old), as Redis expires them. The
            # next prune waits until the live ones have doubled: at most twice the live counters
            # (and _MAX_QUOTA_COUNTERS) are kept, at an amortized constant cost per charge.
            stale = [k for k, w in self._quotas.items() if w.index < now // k[3] - 1]
            for k in stale:
                del self._quotas[k]
            self._quota_prune_at = max(_MAX_QUOTA_COUNTERS, 2 * len(self._quotas))

    def _select(self, req: v.PreparedExtract, now: int) -> list[_Record]:
        names = [("available", ""), *req.filters]
        # Drive from the smallest index; ties go to the most specific (filters come first).
        driving = min(reversed(names), key=lambda name: len(self._index(name)))
        threshold = now + req.min_remaining_ms
        budget = self.options.scan_budget
        need = req.count + req.reserve
        wanted = dict(req.filters)
        matches: list[_Record] = []
        index = self._index(driving)
        for pid in index.above(threshold, budget):
            rec = self._records[pid]
            if self._matches(rec, wanted, req, now, threshold):
                matches.append(rec)
                if len(matches) == need:
                    break
        if len(matches) < need and index.count_above(threshold) > budget:
            raise ScanBudgetExhausted("extract scan budget exhausted; retry shortly")
        take = min(req.count, max(0, len(matches) - req.reserve))
        if req.mode is ExtractMode.ALL_OR_NOTHING and take < req.count:
            raise InsufficientInventory(
                "not enough matching proxies", requested=req.count, available=take
            )
        return matches[:take]

    def _matches(
        self, rec: _Record, wanted: dict[str, str], req: v.PreparedExtract, now: int, threshold: int
    ) -> bool:
        if (
            rec.state is not ProxyState.AVAILABLE
            or rec.proxy_id in self._owners
            or rec.expires_ms <= now
            or rec.usable_ms <= threshold
        ):
            return False
        if req.max_health_age_ms is not None and (
            rec.checked_ms is None or now - rec.checked_ms > req.max_health_age_ms
        ):
            return False
        actual = {"upstream": rec.upstream_id, "region": rec.region, "carrier": rec.carrier,
                  "protocol": rec.protocol}  # fmt: skip
        return all(actual[dim] == value for dim, value in wanted.items())

    # ------------------------------------------------------------------ OwnershipRepository
    def _owner_checked(self, proxy_id: str, worker_id: str, epoch: int) -> tuple[_Record, _Owner]:
        v.text(proxy_id, "proxy_id", self.options)
        v.text(worker_id, "worker_id", self.options)
        v.epoch(epoch)
        check_deadline()
        rec = self._records.get(proxy_id)
        owner = self._owners.get(proxy_id)
        if rec is None:
            raise OwnershipConflict("no such proxy", reason="not_found")
        if owner is None:
            raise OwnershipConflict("proxy is not assigned", reason="not_owned")
        if owner.worker_id != worker_id:
            raise OwnershipConflict("proxy is assigned to another worker", reason="wrong_worker")
        if owner.epoch != epoch:
            raise OwnershipConflict("assignment epoch does not match", reason="wrong_epoch")
        return rec, owner

    def _lease_ms(self, ttl: object) -> int:
        return v.duration_ms(ttl, "ttl", minimum=1, maximum=span_ms(self.options.max_lease_ttl))

    def _set_lease(self, proxy_id: str, owner: _Owner, lease_ms: int) -> None:
        owner.lease_ms = lease_ms
        self._owner_expiry.add(proxy_id, lease_ms)
        if not owner.draining:
            self._zadd(self._worker_owned, owner.worker_id, proxy_id, lease_ms)

    def assign(self, now: datetime, proxy_id: str, worker_id: str, ttl: timedelta) -> Assignment:
        now_ms = v.aware_ms(now, "now")
        v.text(proxy_id, "proxy_id", self.options)
        v.text(worker_id, "worker_id", self.options)
        ttl_ms = self._lease_ms(ttl)
        with self._lock:
            check_deadline()
            # Cleaning follows the pool's clock, never a caller's: a manager running ahead
            # must not delete what the pool still considers live.
            self._clean_expired(self._now(), self.options.clean_budget)
            rec = self._records.get(proxy_id)
            if rec is None or rec.expires_ms <= now_ms:
                raise OwnershipConflict("no such proxy", reason="not_found")
            if proxy_id in self._owners:
                raise OwnershipConflict("proxy is already assigned", reason="already_owned")
            if rec.state is not ProxyState.AVAILABLE:
                raise OwnershipConflict("proxy is not available", reason="not_available")
            if rec.usable_ms <= now_ms:
                raise OwnershipConflict("proxy is past usable_until", reason="past_usable")
            self._epoch += 1
            owner = _Owner(worker_id, self._epoch, min(now_ms + ttl_ms, rec.usable_ms))
            with self._tracking(rec):
                self._owners[proxy_id] = owner
                self._set_lease(proxy_id, owner, owner.lease_ms)
            return owner.view(proxy_id)

    def renew(
        self, now: datetime, proxy_id: str, worker_id: str, epoch: int, ttl: timedelta
    ) -> Assignment:
        now_ms = v.aware_ms(now, "now")
        ttl_ms = self._lease_ms(ttl)
        with self._lock:
            rec, owner = self._owner_checked(proxy_id, worker_id, epoch)
            if owner.draining:
                raise OwnershipConflict("a draining assignment is not renewed", reason="draining")
            if owner.lease_ms <= now_ms:
                raise OwnershipConflict("the lease has expired", reason="lease_expired")
            if rec.usable_ms <= now_ms:
                raise OwnershipConflict("proxy is past usable_until", reason="past_usable")
            self._set_lease(proxy_id, owner, min(now_ms + ttl_ms, rec.usable_ms))
            return owner.view(proxy_id)

    def begin_drain(self, proxy_id: str, worker_id: str, epoch: int) -> Assignment:
        with self._lock:
            rec, owner = self._owner_checked(proxy_id, worker_id, epoch)
            if owner.draining:
                return owner.view(proxy_id)  # idempotent: one ticket, one epoch bump
            self._epoch += 1
            with self._tracking(rec):
                owner.draining = True
                self._zrem(self._worker_owned, worker_id, proxy_id)
            self._tickets[proxy_id] = _Ticket(worker_id, owner.epoch, self._epoch)
            self._zadd(self._worker_draining, worker_id, proxy_id, self._epoch)
            return owner.view(proxy_id)

    def acknowledge_drain(
        self, proxy_id: str, worker_id: str, epoch: int, active: int, reserved: int
    ) -> DrainStatus:
        v.count(active, "active", low=0, high=2**31)
        v.count(reserved, "reserved", low=0, high=2**31)
        with self._lock:
            rec, owner = self._owner_checked(proxy_id, worker_id, epoch)
            if not owner.draining:
                raise OwnershipConflict("begin_drain was not called", reason="not_draining")
            if active or reserved:
                return DrainStatus.WAITING_COUNTS
            status = self._drain_status(proxy_id, worker_id, stated_idle=True)
            if status is DrainStatus.RELEASED:
                self._release(rec)
            return status

    def _drain_status(self, proxy_id: str, worker_id: str, *, stated_idle: bool) -> DrainStatus:
        """The barrier of a pending ticket, checked in the same atomic step as the release.

        The snapshot bound to the ticket (the first excluding one at or past the required
        epoch) must have been issued to, and ACKed by, the worker's live session. Then the
        stored runtime decides: busy there means wait, whatever the caller says (a report may
        have raced the caller's read); a report taken at or after that snapshot showing the
        proxy idle releases; without such a report, the worker's own statement of zero counts
        (``acknowledge_drain``) does.
        """
        ticket = self._tickets[proxy_id]
        session = self._live_session(worker_id)
        bound = ticket.snapshot
        if (
            bound is None
            or session is None
            or session.generation != ticket.generation
            or session.acked is None
            or session.acked.version < bound.version
            or session.acked.epoch < ticket.required_epoch
        ):
            return DrainStatus.WAITING_SNAPSHOT
        runtime = self._fresh_runtime(worker_id)
        if runtime is not None:
            entry = runtime.entries.get(proxy_id)
            if entry is not None and (entry.active or entry.reserved):
                return DrainStatus.WAITING_COUNTS
            if runtime.snapshot_version >= bound.version:
                return DrainStatus.RELEASED
        return DrainStatus.RELEASED if stated_idle else DrainStatus.WAITING_COUNTS

    def _release(self, rec: _Record) -> None:
        with self._tracking(rec):
            self._drop_owner(rec.proxy_id)

    def get(self, proxy_id: str) -> Assignment | None:
        v.text(proxy_id, "proxy_id", self.options)
        with self._lock:
            check_deadline()
            owner = self._owners.get(proxy_id)
            return None if owner is None else owner.view(proxy_id)

    def expire(self, now: datetime, limit: int) -> list[Assignment]:
        now_ms = v.aware_ms(now, "now")
        n = v.limit(limit, self.options)
        with self._lock:
            check_deadline()
            expired = []
            for pid in self._owner_expiry.at_most(now_ms, n):
                owner = self._owners[pid]
                with self._tracking(self._records[pid]):
                    self._drop_owner(pid)
                expired.append(owner.view(pid))
            return expired

    # ------------------------------------------------------------------ sessions
    def _live_session(self, worker_id: str) -> _Session | None:
        session = self._sessions.get(worker_id)
        if session is None or session.expires_ms <= self._server_now():
            return None
        return session

    def _session_for_write(self, worker_id: str, session_id: str) -> _Session:
        v.text(worker_id, "worker_id", self.options)
        v.text(session_id, "session_id", self.options)
        check_deadline()
        session = self._sessions.get(worker_id)
        if session is None or session.session_id != session_id:
            raise SessionFenced("this worker session was replaced or never opened")
        if session.expires_ms <= self._server_now():
            raise SessionExpired("this worker session has expired")
        return session

    def open_session(self, worker_id: str, session_id: str, ttl: timedelta) -> WorkerSession:
        v.text(worker_id, "worker_id", self.options)
        v.text(session_id, "session_id", self.options)
        ttl_ms = self._lease_ms(ttl)
        with self._lock:
            check_deadline()
            now = self._server_now()
            live = self._live_session(worker_id)
            if live is not None and live.session_id == session_id:
                live.expires_ms = now + ttl_ms  # heartbeat of the current instance
                self._session_expiry.add(worker_id, live.expires_ms)
                return live.view(worker_id)
            # A new instance: the old one is fenced and its counts are no longer trusted.
            self._generation += 1
            session = _Session(session_id, self._generation, now + ttl_ms)
            self._sessions[worker_id] = session
            self._session_expiry.add(worker_id, session.expires_ms)
            self._drop_runtime(worker_id)
            return session.view(worker_id)

    def _drop_runtime(self, worker_id: str) -> None:
        self._runtime.pop(worker_id, None)
        self._runtime_expiry.remove(worker_id)

    # ------------------------------------------------------------------ ControlStore
    def worker_assignments(self, worker_id: str, limit: int) -> WorkerAssignments:
        v.text(worker_id, "worker_id", self.options)
        n = v.count(limit, "limit", low=1, high=self.options.max_report_entries)
        with self._lock:
            check_deadline()
            owned = self._worker_owned.get(worker_id) or ZSet()
            items = tuple(self._owners[pid].view(pid) for pid, _ in owned.first(n))
            return WorkerAssignments(self._epoch, items, complete=len(owned) <= n)

    def issue_snapshot(
        self, worker_id: str, session_id: str, ref: SnapshotRef, proxy_ids: Collection[str]
    ) -> int:
        v.snapshot_ref(ref, self.options)
        included = v.proxy_ids(proxy_ids, self.options, "proxy_ids")
        with self._lock:
            session = self._session_for_write(worker_id, session_id)
            if ref.epoch > self._epoch:
                raise SnapshotRejected("snapshot epoch is ahead of the pool", reason="epoch_ahead")
            if session.issued == ref:
                return 0  # the same issue again
            issued = session.issued
            if issued is not None and (ref.version <= issued.version or ref.epoch < issued.epoch):
                raise SnapshotRejected(
                    "snapshot versions and epochs must not go back", reason="version_order"
                )
            for pid in included:
                ticket = self._tickets.get(pid)
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
            pending = self._worker_draining.get(worker_id) or ZSet()
            if len(pending) > self.options.scan_budget:
                raise ScanBudgetExhausted("too many pending drain tickets for one worker")
            session.issued = ref
            bound = 0
            for pid in pending:
                ticket = self._tickets[pid]
                fresh = ticket.snapshot is None or ticket.generation != session.generation
                if fresh and ticket.required_epoch <= ref.epoch and pid not in included:
                    ticket.snapshot, ticket.generation = ref, session.generation
                    bound += 1
            return bound

    def acknowledge_snapshot(self, worker_id: str, session_id: str, version: int) -> WorkerSession:
        v.count(version, "version", low=1, high=v.MAX_COUNTER)
        with self._lock:
            session = self._session_for_write(worker_id, session_id)
            if session.issued is None or session.issued.version != version:
                raise SnapshotRejected("that snapshot was not the last issued", reason="not_issued")
            session.acked = session.issued
            return session.view(worker_id)

    def drain_tickets(self, worker_id: str, limit: int) -> list[DrainTicket]:
        v.text(worker_id, "worker_id", self.options)
        n = v.limit(limit, self.options)
        with self._lock:
            check_deadline()
            pending = self._worker_draining.get(worker_id) or ZSet()
            out = []
            for pid, _ in pending.first(n):
                t = self._tickets[pid]
                out.append(DrainTicket(pid, worker_id, t.assignment_epoch, t.required_epoch,
                                       t.snapshot))  # fmt: skip
            return out

    # ------------------------------------------------------------------ reports
    def write_report(self, report: RuntimeReport) -> ReportResult:
        prepared = v.prepare_report(report, self.options)
        with self._lock:
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
            now = self._server_now()
            runtime = _Runtime(
                report.session_id,
                report.sequence,
                report.snapshot_version,
                report.epoch,
                {e.proxy_id: e for e in report.entries},
                now + span_ms(self.options.report_ttl),
            )
            self._runtime[wid] = runtime
            self._runtime_expiry.add(wid, runtime.expires_ms)
            session.last_sequence, session.last_digest = report.sequence, prepared.body_digest
            return ReportResult(released=self._release_drained(wid))

    def _owned_by(self, proxy_id: str, worker_id: str, epoch: int) -> bool:
        owner = self._owners.get(proxy_id)
        return owner is not None and owner.worker_id == worker_id and owner.epoch == epoch

    def _release_drained(self, worker_id: str) -> tuple[str, ...]:
        """Release draining proxies whose barrier the report just stored lets through.

        Done in the same atomic step as the runtime replacement, so no report can slip in
        between reading the counts and releasing the ownership.
        """
        pending = self._worker_draining.get(worker_id) or ZSet()
        released = [
            pid
            for pid, _ in pending.first(self.options.scan_budget)
            if self._drain_status(pid, worker_id, stated_idle=False) is DrainStatus.RELEASED
        ]
        for pid in released:
            self._release(self._records[pid])
        return tuple(sorted(released))

    def read_runtime(self, worker_id: str) -> RuntimeView | None:
        v.text(worker_id, "worker_id", self.options)
        with self._lock:
            check_deadline()
            runtime = self._fresh_runtime(worker_id)
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
            )

    def _fresh_runtime(self, worker_id: str) -> _Runtime | None:
        session = self._live_session(worker_id)
        runtime = self._runtime.get(worker_id)
        if session is None or runtime is None or runtime.session_id != session.session_id:
            return None
        if runtime.expires_ms <= self._server_now():
            return None
        return runtime

    # ------------------------------------------------------------------ SlotsReader
    def upstream_inventory(self, upstream_id: str) -> UpstreamInventory:
        v.token(upstream_id, "upstream_id")
        with self._lock:
            check_deadline()
            now = self._now()
            self._clean_for_read(upstream_id, now)
            unassigned = self._index(("upstream", upstream_id))
            assigned = self._owned.get(upstream_id) or ZSet()
            budget = self.options.scan_budget
            if unassigned.count_above(now) + assigned.count_above(now) > budget:
                raise ScanBudgetExhausted("upstream has more proxies than one slots scan covers")
            slots = sum(self._records[pid].max_concurrency for pid in unassigned.above(now, budget))
            for pid in assigned.above(now, budget):
                slots += self._assigned_slots(pid, now)
            return UpstreamInventory(self._managed.get(upstream_id, 0), slots)

    def _assigned_slots(self, proxy_id: str, now: int) -> int:
        owner = self._owners[proxy_id]
        runtime = self._fresh_runtime(owner.worker_id)
        if owner.lease_ms <= now or runtime is None or runtime.epoch < owner.epoch:
            return 0  # unknown runtime (none, or from before this assignment): fail closed
        maximum = self._records[proxy_id].max_concurrency
        entry = runtime.entries.get(proxy_id)
        if entry is None:
            return maximum  # sparse report: missing means idle
        if entry.epoch != owner.epoch:
            return 0  # counts from another assignment say nothing about this one
        return max(0, maximum - entry.active - entry.reserved)

    # ------------------------------------------------------------------ Maintenance
    def sweep(self, limit: int) -> SweepResult:
        n = v.limit(limit, self.options)
        with self._lock:
            check_deadline()
            removed, more_records = self._clean_expired(self._now(), n)
            sessions, more_sessions = self._clean_sessions(self._server_now(), n)
            quarantines, more_quarantines = self._clean_quarantine(self._now(), n)
            return SweepResult(
                expired=removed,
                sessions=sessions,
                more=more_records or more_sessions or more_quarantines,
                quarantines=quarantines,
            )

    def _clean_sessions(self, now_ms: int, limit: int) -> tuple[int, bool]:
        """Forget expired sessions and runtime reports (the ADR's *-expiry indexes)."""
        for worker_id in self._runtime_expiry.at_most(now_ms, limit):
            self._drop_runtime(worker_id)
        due = self._session_expiry.at_most(now_ms, limit + 1)
        for worker_id in due[:limit]:
            self._session_expiry.remove(worker_id)
            del self._sessions[worker_id]
            self._drop_runtime(worker_id)
        return min(len(due), limit), len(due) > limit

    # ------------------------------------------------------------------ OutcomeStore
    def report_outcome(self, report: OutcomeReport) -> OutcomeResult:
        with self._lock:
            now = self._now()
            p = v.prepare_outcome(report, self.options, now)
            check_deadline()
            self._clean_quarantine(now, self.options.clean_budget)
            rec = self._records.get(p.proxy_id)
            if rec is None or rec.expires_ms <= now or rec.extracted_by != p.client_id:
                # One answer for all three: a client never learns of another's proxies.
                raise OutcomeRejected("no such proxy extracted by this client", reason="not_found")
            stored = self._outcomes.get(p.proxy_id)
            replayed = stored is not None
            if stored is None:
                until = None
                if p.until_ms is not None:
                    until = self._quarantine_exit(rec.key_digest, p.host or EVERY_HOST, p.until_ms)
                stored = self._outcomes[p.proxy_id] = _Outcome(p.outcome, p.host, until)
            elif (stored.outcome, stored.host) != (p.outcome, p.host):
                raise OutcomeRejected("this proxy already has another outcome", reason="conflict")
            quarantined = None if stored.until_ms is None else from_ms(stored.until_ms)
            return OutcomeResult(p.proxy_id, rec.upstream_id, stored.outcome, stored.host,
                                 replayed, quarantined)  # fmt: skip

    def _quarantined(self, key_digest: str, host: str, now_ms: int) -> bool:
        until = self._quarantine.get(key_digest, {}).get(host)
        return until is not None and until > now_ms

    def _quarantine_exit(self, key_digest: str, host: str, until_ms: int) -> int:
        """Quarantine the exit for ``host`` until ``until_ms``; a longer one stands."""
        hosts = self._quarantine.setdefault(key_digest, {})
        until = hosts[host] = max(hosts.get(host, 0), until_ms)
        self._quarantine_expiry.add(f"{key_digest}|{host}", until)
        return until

    def _clean_quarantine(self, now_ms: int, limit: int) -> tuple[int, bool]:
        """Forget up to ``limit`` ended quarantine entries; (removed, more remain)."""
        due = self._quarantine_expiry.at_most(now_ms, limit + 1)
        for member in due[:limit]:
            self._quarantine_expiry.remove(member)
            key_digest, _, host = member.partition("|")
            hosts = self._quarantine[key_digest]
            del hosts[host]
            if not hosts:
                del self._quarantine[key_digest]
        return min(len(due), limit), len(due) > limit

    def quarantine_of(self, proxy_ids: Sequence[str], now: datetime) -> dict[str, frozenset[str]]:
        ids = v.quarantine_query(proxy_ids, self.options)
        now_ms = v.aware_ms(now, "now", InvalidBatch)
        with self._lock:
            check_deadline()
            out: dict[str, frozenset[str]] = {}
            examined = 0
            for pid in ids:
                rec = self._records.get(pid)
                if rec is None or rec.expires_ms <= now_ms:
                    continue
                hosts = self._quarantine.get(rec.key_digest, {})
                examined += len(hosts)
                if examined > self.options.scan_budget:
                    raise ScanBudgetExhausted("more quarantine entries than one read may examine")
                live = frozenset(h for h, until in hosts.items() if until > now_ms)
                if live:
                    out[pid] = live
            return out


def _apply_candidate(rec: _Record, cand: v.PreparedProxy) -> None:
    rec.host, rec.port, rec.protocol = cand.host, cand.port, cand.protocol
    rec.region, rec.carrier = cand.region, cand.carrier
    rec.max_concurrency = cand.max_concurrency
    rec.expires_ms, rec.usable_ms = cand.expires_ms, cand.usable_ms
    rec.username, rec.password, rec.labels = cand.username, cand.password, cand.labels


def _extracted(rec: _Record) -> ExtractedProxy:
    return ExtractedProxy(
        proxy_id=rec.proxy_id,
        upstream_id=rec.upstream_id,
        host=rec.host,
        port=rec.port,
        protocol=rec.protocol,
        region=rec.region,
        carrier=rec.carrier,
        expires_at=from_ms(rec.expires_ms),
        usable_until=from_ms(rec.usable_ms),
        username=rec.username,
        password=rec.password,
        labels=dict(rec.labels),
    )
