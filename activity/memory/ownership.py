"""Ownership and drain: the ownership manager leases proxies to gateway workers, and a lease
ends through a drain whose barrier waits for an excluding snapshot and idle counts (port
OwnershipRepository)."""

from __future__ import annotations

from datetime import datetime, timedelta

from activity._checks import aware_ms, count, duration_ms
from activity._time import span_ms
from activity._validation.common import epoch as check_epoch
from activity._validation.common import limit as check_limit
from activity._validation.common import text
from activity._zset import ZSet
from activity.deadline import check_deadline
from activity.errors import OwnershipConflict
from activity.memory._records import Owner, Record, Ticket
from activity.memory._state import PoolState, zadd, zrem
from activity.types import Assignment, DrainStatus, PoolOptions, ProxyState


class Ownership:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    def assign(self, now: datetime, proxy_id: str, worker_id: str, ttl: timedelta) -> Assignment:
        s = self._s
        now_ms = aware_ms(now, "now")
        text(proxy_id, "proxy_id", s.options)
        text(worker_id, "worker_id", s.options)
        ttl_ms = lease_ms(ttl, s.options)
        with s.lock:
            check_deadline()
            # Cleaning follows the pool's clock, never a caller's: a manager running ahead
            # must not delete what the pool still considers live.
            s.clean_expired(s.now(), s.options.clean_budget)
            rec = s.records.get(proxy_id)
            if rec is None or rec.expires_ms <= now_ms:
                raise OwnershipConflict("no such proxy", reason="not_found")
            if proxy_id in s.owners:
                raise OwnershipConflict("proxy is already assigned", reason="already_owned")
            if rec.state is not ProxyState.AVAILABLE:
                raise OwnershipConflict("proxy is not available", reason="not_available")
            if rec.usable_ms <= now_ms:
                raise OwnershipConflict("proxy is past usable_until", reason="past_usable")
            s.epoch += 1
            owner = Owner(worker_id, s.epoch, min(now_ms + ttl_ms, rec.usable_ms))
            with s.tracking(rec):
                s.owners[proxy_id] = owner
                s.set_lease(proxy_id, owner, owner.lease_ms)
            return owner.view(proxy_id)

    def renew(
        self, now: datetime, proxy_id: str, worker_id: str, epoch: int, ttl: timedelta
    ) -> Assignment:
        s = self._s
        now_ms = aware_ms(now, "now")
        ttl_ms = lease_ms(ttl, s.options)
        with s.lock:
            rec, owner = self._owner_checked(proxy_id, worker_id, epoch)
            if owner.draining:
                raise OwnershipConflict("a draining assignment is not renewed", reason="draining")
            if owner.lease_ms <= now_ms:
                raise OwnershipConflict("the lease has expired", reason="lease_expired")
            if rec.usable_ms <= now_ms:
                raise OwnershipConflict("proxy is past usable_until", reason="past_usable")
            s.set_lease(proxy_id, owner, min(now_ms + ttl_ms, rec.usable_ms))
            return owner.view(proxy_id)

    def begin_drain(self, proxy_id: str, worker_id: str, epoch: int) -> Assignment:
        s = self._s
        with s.lock:
            rec, owner = self._owner_checked(proxy_id, worker_id, epoch)
            if owner.draining:
                return owner.view(proxy_id)  # idempotent: one ticket, one epoch bump
            s.epoch += 1
            with s.tracking(rec):
                owner.draining = True
                zrem(s.worker_owned, worker_id, proxy_id)
            s.bump_revision(worker_id)
            s.tickets[proxy_id] = Ticket(worker_id, owner.epoch, s.epoch, began_ms=s.server_now())
            zadd(s.worker_draining, worker_id, proxy_id, s.epoch)
            return owner.view(proxy_id)

    def acknowledge_drain(
        self, proxy_id: str, worker_id: str, epoch: int, active: int, reserved: int
    ) -> DrainStatus:
        s = self._s
        count(active, "active", low=0, high=2**31)
        count(reserved, "reserved", low=0, high=2**31)
        with s.lock:
            rec, owner = self._owner_checked(proxy_id, worker_id, epoch)
            if not owner.draining:
                raise OwnershipConflict("begin_drain was not called", reason="not_draining")
            if active or reserved:
                return DrainStatus.WAITING_COUNTS
            status = _drain_status(s, proxy_id, worker_id, stated_idle=True)
            if status is DrainStatus.RELEASED:
                _release(s, rec)
            return status

    def get(self, proxy_id: str) -> Assignment | None:
        s = self._s
        text(proxy_id, "proxy_id", s.options)
        with s.lock:
            check_deadline()
            owner = s.owners.get(proxy_id)
            return None if owner is None else owner.view(proxy_id)

    def expire(self, now: datetime, limit: int) -> list[Assignment]:
        s = self._s
        now_ms = aware_ms(now, "now")
        n = check_limit(limit, s.options)
        with s.lock:
            check_deadline()
            expired = []
            for pid in s.owner_expiry.at_most(now_ms, n):
                owner = s.owners[pid]
                with s.tracking(s.records[pid]):
                    s.drop_owner(pid)
                expired.append(owner.view(pid))
            return expired

    def _owner_checked(self, proxy_id: str, worker_id: str, epoch: int) -> tuple[Record, Owner]:
        s = self._s
        text(proxy_id, "proxy_id", s.options)
        text(worker_id, "worker_id", s.options)
        check_epoch(epoch)
        check_deadline()
        rec = s.records.get(proxy_id)
        owner = s.owners.get(proxy_id)
        if rec is None:
            raise OwnershipConflict("no such proxy", reason="not_found")
        if owner is None:
            raise OwnershipConflict("proxy is not assigned", reason="not_owned")
        if owner.worker_id != worker_id:
            raise OwnershipConflict("proxy is assigned to another worker", reason="wrong_worker")
        if owner.epoch != epoch:
            raise OwnershipConflict("assignment epoch does not match", reason="wrong_epoch")
        return rec, owner


def lease_ms(ttl: object, options: PoolOptions) -> int:
    """A lease or session TTL, checked against the longest one a call may ask for."""
    return duration_ms(ttl, "ttl", minimum=1, maximum=span_ms(options.max_lease_ttl))


def release_drained(state: PoolState, worker_id: str) -> tuple[str, ...]:
    """Release draining proxies whose barrier the report just stored lets through.

    Done in the same atomic step as the runtime replacement, so no report can slip in
    between reading the counts and releasing the ownership.
    """
    pending = state.worker_draining.get(worker_id) or ZSet()
    released = [
        pid
        for pid, _ in pending.first(state.options.scan_budget)
        if _drain_status(state, pid, worker_id, stated_idle=False) is DrainStatus.RELEASED
    ]
    for pid in released:
        _release(state, state.records[pid])
    return tuple(sorted(released))


def _drain_status(
    state: PoolState, proxy_id: str, worker_id: str, *, stated_idle: bool
) -> DrainStatus:
    """The barrier of a pending ticket, checked in the same atomic step as the release.

    The snapshot bound to the ticket (the first excluding one at or past the required
    epoch) must have been issued to, and ACKed by, the worker's live session. Then the
    stored runtime decides: busy there means wait, whatever the caller says (a report may
    have raced the caller's read); a report taken at or after that snapshot showing the
    proxy idle releases; without such a report, the worker's own statement of zero counts
    (``acknowledge_drain``) does.
    """
    ticket = state.tickets[proxy_id]
    session = state.live_session(worker_id)
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
    runtime = state.fresh_runtime(worker_id)
    if runtime is not None:
        entry = runtime.entries.get(proxy_id)
        if entry is not None and (entry.active or entry.reserved):
            return DrainStatus.WAITING_COUNTS
        if runtime.snapshot_version >= bound.version:
            return DrainStatus.RELEASED
    return DrainStatus.RELEASED if stated_idle else DrainStatus.WAITING_COUNTS


def _release(state: PoolState, rec: Record) -> None:
    with state.tracking(rec):
        state.drop_owner(rec.proxy_id)
