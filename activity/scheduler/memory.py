"""The scheduler's reference model: the rules in plain Python, one lock, held to the same
contract as the Redis implementation (activity/scheduler/contract.py)."""

from __future__ import annotations

import bisect
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from activity._time import from_ms
from activity.errors import InvalidRequest, LeaseLost
from activity.scheduler import _checks
from activity.scheduler.types import (
    MAX_CALLS_PER_MINUTE,
    MAX_GRANTS_PER_MINUTE,
    MAX_PROXIES_PER_TAKE,
    MAX_UPSTREAMS_PER_ACCOUNT,
    AccountLimits,
    Claim,
    FetchStatus,
    NoClaim,
    Refusal,
    RequestOutcome,
)


@dataclass
class _Account:
    cadence: dict[str, int] = field(default_factory=dict)  # upstream -> due ms
    priority: dict[str, int] = field(default_factory=dict)  # upstream -> request ms
    running: dict[str, tuple[str, int]] = field(default_factory=dict)  # -> (token, lease end)
    requests: dict[str, int] = field(default_factory=dict)  # upstream -> last accepted request
    pending: dict[str, int] = field(default_factory=dict)  # requested while running -> ms
    calls: list[int] = field(default_factory=list)  # vendor API calls of the last minute, ms
    #: Proxies granted in the last minute: (ms, count), in time order.
    proxies: list[tuple[int, int]] = field(default_factory=list)


def _first(queue: dict[str, int]) -> tuple[str, int] | None:
    """The lowest (score, member), as a Redis sorted set orders them."""
    if not queue:
        return None
    member = min(queue, key=lambda m: (queue[m], m))
    return member, queue[member]


class MemoryScheduler:
    """In-process scheduler (tests, the differential reference); one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._accounts: dict[str, _Account] = {}

    def _account(self, account_id: str) -> _Account:
        return self._accounts.setdefault(account_id, _Account())

    def schedule(self, account_id: str, upstream_id: str, due_at: datetime) -> bool:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        due = _checks.due(due_at, "due_at")
        with self._lock:
            account = self._account(account_id)
            if upstream_id in account.cadence:
                return False
            if len(account.cadence) >= MAX_UPSTREAMS_PER_ACCOUNT:
                raise InvalidRequest(
                    f"an account may have at most {MAX_UPSTREAMS_PER_ACCOUNT} upstreams scheduled",
                    reason="too_many_upstreams",
                )
            running = account.running.get(upstream_id)
            # Still running (forgotten, then scheduled again): not due before its lease ends.
            account.cadence[upstream_id] = max(due, running[1]) if running else due
            return True

    def forget(self, account_id: str, upstream_id: str) -> bool:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        with self._lock:
            account = self._accounts.get(account_id)
            if account is None:
                return False
            known = account.cadence.pop(upstream_id, None) is not None
            account.priority.pop(upstream_id, None)
            account.requests.pop(upstream_id, None)
            account.pending.pop(upstream_id, None)
            return known  # a fetch running goes on; its finish schedules nothing

    def drop_account(self, account_id: str) -> None:
        account_id = _checks.account(account_id)
        with self._lock:
            self._accounts.pop(account_id, None)

    def claim(
        self, now: datetime, account_id: str, limits: AccountLimits, lease: timedelta
    ) -> Claim | NoClaim:
        account_id = _checks.account(account_id)
        now_ms, lease_ms = _checks.instant(now), _checks.lease(lease)
        concurrency, per_second, per_minute = _checks.limits(limits)
        with self._lock:
            account = self._account(account_id)
            for upstream, (_, ends) in list(account.running.items()):
                if ends <= now_ms:  # a lease that ended: its fetch is lost, due again
                    del account.running[upstream]
            requested = _first(account.priority)
            candidate = requested[0] if requested else None
            if candidate is None:
                due = _first(account.cadence)
                if due is None:
                    return NoClaim(Refusal.NOTHING_DUE, None)
                if due[1] > now_ms:
                    return NoClaim(Refusal.NOTHING_DUE, timedelta(milliseconds=due[1] - now_ms))
                candidate = due[0]
            if len(account.running) >= concurrency:
                first_end = min(ends for _, ends in account.running.values())
                return NoClaim(Refusal.CONCURRENCY, timedelta(milliseconds=first_end - now_ms))
            wait = self._call_wait(account, now_ms, per_second, per_minute)
            if wait is not None:
                return NoClaim(Refusal.CALLS, timedelta(milliseconds=wait))
            token = secrets.token_hex(16)
            ends = now_ms + lease_ms
            self._add_call(account, now_ms)
            account.running[candidate] = (token, ends)
            account.priority.pop(candidate, None)
            # A request made while a lost fetch ran is served by this claim, not after it.
            waited = account.pending.pop(candidate, None) is not None
            if candidate in account.cadence:  # due again if the lease ends unfinished
                account.cadence[candidate] = ends
            return Claim(
                account_id, candidate, token, from_ms(ends), requested is not None or waited
            )

    def renew(self, now: datetime, claim: Claim, lease: timedelta) -> Claim:
        account_id, upstream_id, token = _checks.claim(claim)
        now_ms, lease_ms = _checks.instant(now), _checks.lease(lease)
        with self._lock:
            account = self._current(account_id, upstream_id, token, now_ms)
            ends = now_ms + lease_ms
            account.running[upstream_id] = (token, ends)
            if upstream_id in account.cadence:  # a later due time (scheduled again) stands
                account.cadence[upstream_id] = max(account.cadence[upstream_id], ends)
            return Claim(account_id, upstream_id, token, from_ms(ends), claim.requested)

    def take_call(self, now: datetime, claim: Claim, limits: AccountLimits) -> timedelta | None:
        account_id, upstream_id, token = _checks.claim(claim)
        now_ms = _checks.instant(now)
        _, per_second, per_minute = _checks.limits(limits)
        with self._lock:
            account = self._current(account_id, upstream_id, token, now_ms)
            wait = self._call_wait(account, now_ms, per_second, per_minute)
            if wait is not None:
                return timedelta(milliseconds=wait)
            self._add_call(account, now_ms)
            return None

    def take_proxies(self, now: datetime, claim: Claim, limits: AccountLimits, wanted: int) -> int:
        account_id, upstream_id, token = _checks.claim(claim)
        now_ms, asked = _checks.instant(now), _checks.wanted(wanted)
        most = _checks.proxies_limit(limits)
        with self._lock:
            account = self._current(account_id, upstream_id, token, now_ms)
            grants = account.proxies
            del grants[: bisect.bisect_right(grants, (now_ms - 60_000, MAX_PROXIES_PER_TAKE))]
            if len(grants) >= MAX_GRANTS_PER_MINUTE:  # grants and returns
                return 0  # the log is full: nothing more this minute (fails closed)
            if not most:
                granted = asked
            else:
                used = max(0, sum(n for at, n in grants if at > now_ms - 60_000))
                granted = max(0, min(asked, most - used))
            if granted:
                bisect.insort(grants, (now_ms, granted))
            return granted

    def give_back_proxies(
        self, now: datetime, claim: Claim, count: int, taken_at: datetime
    ) -> None:
        account_id, upstream_id, token = _checks.claim(claim)
        now_ms, returned = _checks.instant(now), _checks.wanted(count)
        taken_ms = min(_checks.instant(taken_at, "taken_at"), now_ms)
        with self._lock:
            account = self._current(account_id, upstream_id, token, now_ms)
            if returned and taken_ms > now_ms - 60_000:
                bisect.insort(account.proxies, (taken_ms, -returned))

    def finish(self, now: datetime, claim: Claim, next_due_at: datetime) -> None:
        account_id, upstream_id, token = _checks.claim(claim)
        now_ms, next_due = _checks.instant(now), _checks.due(next_due_at, "next_due_at")
        with self._lock:
            account = self._current(account_id, upstream_id, token, now_ms)
            del account.running[upstream_id]
            if upstream_id in account.cadence:
                account.cadence[upstream_id] = next_due
                requested = account.pending.pop(upstream_id, None)
                if requested is not None:
                    account.priority.setdefault(upstream_id, requested)

    def request(
        self, now: datetime, account_id: str, upstream_id: str, cooldown: timedelta
    ) -> RequestOutcome:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        now_ms, cooldown_ms = _checks.instant(now), _checks.cooldown(cooldown)
        with self._lock:
            account = self._accounts.get(account_id)
            if account is None or upstream_id not in account.cadence:
                return RequestOutcome.UNKNOWN
            last = account.requests.get(upstream_id)
            if last is not None and now_ms < last + cooldown_ms:
                return RequestOutcome.MERGED
            account.requests[upstream_id] = now_ms
            # Any running entry, its lease ended by this clock or not: only a claim gives a
            # lease up, so a dispatcher whose clock is behind never sees it queued and running.
            if upstream_id in account.running:
                account.pending.setdefault(upstream_id, now_ms)
            else:
                account.priority.setdefault(upstream_id, now_ms)
            return RequestOutcome.ACCEPTED

    def status(self, now: datetime, account_id: str, upstream_id: str) -> FetchStatus:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        now_ms = _checks.instant(now)
        with self._lock:
            account = self._accounts.get(account_id) or _Account()
            due = account.cadence.get(upstream_id)
            running = account.running.get(upstream_id)
            requested = account.priority.get(upstream_id, account.pending.get(upstream_id))
            window = now_ms - 60_000
            inside = [n for at, n in account.proxies if at > window]  # oldest first, as Redis
            granted = sum(inside[:MAX_GRANTS_PER_MINUTE])
            return FetchStatus(
                due_at=None if due is None else from_ms(due),
                running_until=from_ms(running[1]) if running and running[1] > now_ms else None,
                requested_at=None if requested is None else from_ms(requested),
                calls_last_minute=sum(1 for at in account.calls if at > window),
                proxies_last_minute=max(0, granted),
            )

    # ------------------------------------------------------------------ rules
    def _current(self, account_id: str, upstream_id: str, token: str, now_ms: int) -> _Account:
        account = self._account(account_id)
        running = account.running.get(upstream_id)
        if running is None or running[0] != token or running[1] <= now_ms:
            raise LeaseLost(f"the claim of {upstream_id} is not current")
        return account

    @staticmethod
    def _call_wait(account: _Account, now_ms: int, per_second: int, per_minute: int) -> int | None:
        """Milliseconds until one more call fits every window, or None if it fits now. A call
        at ``t`` counts in the window of length ``w`` while ``t > now - w``."""
        calls = account.calls
        del calls[: bisect.bisect_right(calls, now_ms - 60_000)]  # out of every window
        wait = None
        for length, most in _checks.window_ms(per_second, per_minute):
            inside = calls[bisect.bisect_right(calls, now_ms - length) :]
            if len(inside) >= most:
                leaves = inside[len(inside) - most] + length  # then one fewer than most remain
                wait = max(wait or 0, leaves - now_ms)
        return wait

    @staticmethod
    def _add_call(account: _Account, now_ms: int) -> None:
        """Log the call; only the newest ``MAX_CALLS_PER_MINUTE`` are kept, which is all any
        window can need (a limit is at most that; the answer depends on the newest ``most``
        calls inside a window only), also when no limit applies."""
        bisect.insort(account.calls, now_ms)
        del account.calls[:-MAX_CALLS_PER_MINUTE]
