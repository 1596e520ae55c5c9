"""Upsert and health: what providers fetched enters the pool, health checks move it between
states, and the upstream's inventory is read back (ports Upserter, HealthStore,
InventoryReader, RecheckQueue)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from activity._checks import digest, token
from activity._time import from_ms, span_ms
from activity._validation.upsert import (
    PreparedBatch,
    PreparedProxy,
    PreparedRecheck,
    prepare_batch,
    prepare_health,
    prepare_recheck,
)
from activity._zset import ZSet
from activity.deadline import check_deadline
from activity.memory._records import TERMINAL, Record
from activity.memory._state import TAKEABLE, PoolState, zadd
from activity.memory.outcomes import quarantined, suspected
from activity.types import (
    EVERY_HOST,
    DueCheck,
    DueChecks,
    FetchedBatch,
    HealthResult,
    HealthUpdate,
    ProxyState,
    RecheckPolicy,
    UpsertResult,
)


class Upserts:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    # ------------------------------------------------------------------ Upserter
    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        s = self._s
        with s.lock:
            now = s.now()
            prepared = prepare_batch(batch, s.options, s.credentials, now)
            check_deadline()
            op = None
            if batch.operation_id is not None:
                op = digest("op-upsert", prepared.upstream_id, batch.operation_id)
                stored = s.replayed("op", op, prepared.content_digest, now)
                if isinstance(stored, UpsertResult):
                    # As upsert.lua's whole-call replay: its counts, not its new IDs.
                    return dataclasses.replace(stored, replayed=True, inserted_ids=())
            counts = Counter[str]()
            new: list[str] = []
            # Chunks of script_batch_cap input positions, each starting with its own bounded
            # clean, exactly as RedisPool runs one call per chunk: the counts agree.
            for chunk in prepared.chunks(s.options.script_batch_cap):
                self._upsert_chunk(prepared, chunk, now, counts, new)
            result = UpsertResult(
                inserted=counts["inserted"],
                refreshed=counts["refreshed"],
                dropped=prepared.dropped,
                conflicts=counts["conflicts"],
                skipped_terminal=counts["skipped_terminal"],
                over_capacity=counts["over_capacity"],
                cleaned=counts["cleaned"],
                quarantined=counts["quarantined"],
                suspect=counts["suspect"],
                inserted_ids=tuple(new),
            )
            if op is not None:
                expires = now + span_ms(s.options.operation_ttl)
                s.store_replay("op", op, prepared.content_digest, result, expires)
            return result

    def _upsert_chunk(
        self,
        batch: PreparedBatch,
        chunk: Sequence[PreparedProxy],
        now: int,
        counts: Counter[str],
        new: list[str],
    ) -> None:
        s = self._s
        counts["cleaned"] += s.clean_expired(now, s.options.clean_budget)[0]
        upstream = batch.upstream_id
        if s.inventory.get(upstream, 0) + len(chunk) > batch.max_size:
            # max_size is about live stock: the upstream's own expired records must not hold
            # places. Bounded by the scan budget; beyond it the limit errs on the safe side.
            expiry = s.upstream_expiry.get(upstream) or ZSet()
            counts["cleaned"] += s.clean_expired(now, s.options.scan_budget, expiry)[0]
        for cand in chunk:
            if self._upsert_one(batch, cand, now, counts):
                new.append(cand.proxy_id)

    def _upsert_one(
        self, batch: PreparedBatch, cand: PreparedProxy, now: int, counts: Counter[str]
    ) -> bool:
        """One candidate of ADR-005's six upsert steps; whether it began a new lifecycle."""
        s = self._s
        holder_id = s.unique.get(cand.key_digest)
        for pid in (holder_id, cand.proxy_id):
            rec = s.records.get(pid) if pid is not None else None
            if rec is not None and rec.expires_ms <= now:
                s.expire(rec)  # an expired incumbent never blocks a new lifecycle
                counts["cleaned"] += 1
        holder_id = s.unique.get(cand.key_digest)
        rec = s.records.get(cand.proxy_id)
        if rec is None:
            if holder_id is not None:
                counts["conflicts"] += 1  # the exit is already held under another proxy ID
            elif quarantined(s, cand.key_digest, EVERY_HOST, now):
                counts["quarantined"] += 1  # a banned exit is not taken again for a while
            elif s.inventory.get(batch.upstream_id, 0) >= batch.max_size:
                counts["over_capacity"] += 1
            else:
                suspect = suspected(s, cand.key_digest, now)
                self._insert(batch, cand, ProxyState.SUSPECT if suspect else ProxyState.FETCHED)
                counts["inserted"] += 1
                counts["suspect"] += suspect
                return True
        elif rec.key_digest != cand.key_digest or rec.upstream_id != batch.upstream_id:
            counts["conflicts"] += 1  # the incumbent (ID and upstream) keeps its lifecycle
        elif rec.state in TERMINAL:
            counts["skipped_terminal"] += 1  # EXTRACTED never re-enters by refresh
        else:
            with s.tracking(rec):
                _apply_candidate(rec, cand)
                rec.fetched_ms = batch.fetched_ms  # as upsert.lua's new static JSON says
                self._set_expiry(rec)
                owner = s.owners.get(rec.proxy_id)
                if owner is not None and owner.lease_ms > rec.usable_ms:
                    s.set_lease(rec.proxy_id, owner, rec.usable_ms)  # lease <= usable_until
                if owner is not None and not owner.draining:
                    # The worker's snapshot describes the proxy by this record: any rewrite
                    # counts, compared or not (each rewrites fetched_at, mostly the lifetimes).
                    s.bump_revision(owner.worker_id)
            counts["refreshed"] += 1
        return False

    def _set_expiry(self, rec: Record) -> None:
        self._s.expiry.add(rec.proxy_id, rec.expires_ms)
        zadd(self._s.upstream_expiry, rec.upstream_id, rec.proxy_id, rec.expires_ms)

    def _insert(self, batch: PreparedBatch, cand: PreparedProxy, state: ProxyState) -> None:
        s = self._s
        rec = Record(
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
            state=state,
        )
        with s.tracking(rec):  # absent on entry: the insert is counted on exit
            s.records[rec.proxy_id] = rec
        s.unique[cand.key_digest] = cand.proxy_id
        self._set_expiry(rec)
        # Unchecked: by fetch time, so a recheck gives it the intake check it may never get.
        zadd(s.checkable, batch.upstream_id, rec.proxy_id, batch.fetched_ms)

    # ------------------------------------------------------------------ HealthStore
    def apply_health(self, updates: Sequence[HealthUpdate]) -> HealthResult:
        s = self._s
        with s.lock:
            now = s.now()
            prepared = prepare_health(updates, s.options, now)
            check_deadline()
            s.clean_expired(now, s.options.clean_budget)
            applied = missing = ignored = stale = 0
            for upd in prepared:
                rec = s.records.get(upd.proxy_id)
                if rec is None or rec.expires_ms <= now:
                    missing += 1
                elif rec.state in TERMINAL or upd.expected not in (None, rec.state):
                    ignored += 1
                elif rec.checked_ms is not None and upd.checked_ms < rec.checked_ms:
                    stale += 1
                else:
                    with s.tracking(rec):
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

    # ------------------------------------------------------------------ RecheckQueue
    def take_due_checks(
        self, upstream_id: str, now: datetime, policy: RecheckPolicy, limit: int
    ) -> DueChecks:
        s = self._s
        p = prepare_recheck(upstream_id, now, policy, limit, s.options)
        with s.lock:
            check_deadline()
            index = s.checkable.get(p.upstream_id) or ZSet()
            budget = s.options.scan_budget
            members = index.at_most(p.now_ms - p.min_interval_ms, budget + 1)
            found: list[DueCheck] = []
            complete = len(members) <= budget
            for position, pid in enumerate(members[:budget]):
                rec = s.records.get(pid)
                if rec is None or rec.state not in TAKEABLE:
                    index.remove(pid)  # left the checked states since it was indexed
                    continue
                score = _standing(rec, p)
                if score is not True:
                    index.add(pid, score)
                    continue
                found.append(_due_check(rec))
                index.add(pid, p.now_ms)  # taken: not handed out again for min_interval
                if len(found) == p.limit:
                    complete = complete and position == len(members) - 1
                    break
            if p.upstream_id in s.checkable and not index:
                del s.checkable[p.upstream_id]  # empty sets vanish, as in Redis
            return DueChecks(tuple(found), complete)

    # ------------------------------------------------------------------ InventoryReader
    def inventory(self, upstream_id: str) -> int:
        token(upstream_id, "upstream_id")
        s = self._s
        with s.lock:
            check_deadline()
            s.clean_for_read(upstream_id, s.now())
            return s.inventory.get(upstream_id, 0)


def _standing(rec: Record, p: PreparedRecheck) -> int | Literal[True]:
    """True when due; else the score that has the record examined again only when it may be
    due (its due time less min_interval), or not before usable_until when it never will be
    under this policy. The pair of lua/take_due_checks.lua's ``standing``: products and an
    exact ceiling, so Lua's doubles give the same answer."""
    remaining = rec.usable_ms - p.now_ms
    if remaining <= 0 or remaining < p.min_remaining_ms:
        return rec.usable_ms
    if rec.checked_ms is None or rec.state is ProxyState.SUSPECT:
        return True  # a first check, or the deciding second one
    if not p.available:
        return rec.usable_ms
    ck = rec.checked_ms
    elapsed = p.now_ms - ck
    if elapsed >= p.min_interval_ms and (
        elapsed >= remaining or elapsed * p.lifetime_fraction >= remaining
    ):
        return True
    # Due at t with t - ck >= (uu - t) / fraction: t >= ck + (uu - ck) / (fraction + 1).
    at = max(ck + p.min_interval_ms, ck - (-(rec.usable_ms - ck) // (p.lifetime_fraction + 1)))
    if rec.usable_ms - at < p.min_remaining_ms:
        return rec.usable_ms
    return at - p.min_interval_ms


def _due_check(rec: Record) -> DueCheck:
    checked = None if rec.checked_ms is None else from_ms(rec.checked_ms)
    return DueCheck(
        rec.proxy_id,
        rec.upstream_id,
        rec.state,
        rec.host,
        rec.port,
        rec.protocol,
        checked,
        from_ms(rec.usable_ms),
        rec.username,
        rec.password,
    )


def _apply_candidate(rec: Record, cand: PreparedProxy) -> None:
    rec.host, rec.port, rec.protocol = cand.host, cand.port, cand.protocol
    rec.region, rec.carrier = cand.region, cand.carrier
    rec.max_concurrency = cand.max_concurrency
    rec.expires_ms, rec.usable_ms = cand.expires_ms, cand.usable_ms
    rec.username, rec.password, rec.labels = cand.username, cand.password, cand.labels
