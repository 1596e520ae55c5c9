"""The fetch scheduler on Redis: the rules of activity/scheduler/memory.py as one function
library (lua/scheduler/), each operation one atomic FCALL, so any number of dispatchers and
fetch tasks, in any processes, share one account's leases and budgets."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

import redis

from activity._checks import digest, token
from activity._time import from_ms
from activity.lua_functions import LUA_DIR, FunctionLibrary, Scripts
from activity.scheduler import _checks
from activity.scheduler.types import (
    MAX_GRANTS_PER_MINUTE,
    MAX_UPSTREAMS_PER_ACCOUNT,
    AccountLimits,
    Claim,
    FetchStatus,
    NoClaim,
    Refusal,
    RequestOutcome,
)

_DIR = LUA_DIR / "scheduler"
OPERATIONS = (
    "schedule",
    "forget",
    "drop_account",
    "claim",
    "renew",
    "take_call",
    "take_proxies",
    "give_back_proxies",
    "finish",
    "request",
    "status",
)
_WRAPPER = (
    "redis.register_function('{name}_{suffix}', function(KEYS, ARGV)\n"
    "  bind(KEYS[1], ARGV[1])\n"
    "  return (function()\n{body}\n  end)()\n"
    "end)\n"
)
SCHEDULER_LIBRARY = FunctionLibrary.of_folder("pp_sched", _DIR, OPERATIONS, _WRAPPER)


class RedisScheduler:
    """The scheduler under ``<prefix>:{sched}:`` on ``client`` (keys: lua/scheduler/lib.lua)."""

    def __init__(self, client: redis.Redis, prefix: str = "pp") -> None:
        token(prefix, "prefix")
        self._scripts = Scripts(client, f"{prefix}:{{sched}}:meta", SCHEDULER_LIBRARY)

    def schedule(self, account_id: str, upstream_id: str, due_at: datetime) -> bool:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        due = _checks.due(due_at, "due_at")
        return bool(self._call("schedule", account_id, upstream_id, due, MAX_UPSTREAMS_PER_ACCOUNT))

    def forget(self, account_id: str, upstream_id: str) -> bool:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        return bool(self._call("forget", account_id, upstream_id))

    def drop_account(self, account_id: str) -> None:
        self._call("drop_account", _checks.account(account_id))

    def claim(
        self, now: datetime, account_id: str, limits: AccountLimits, lease: timedelta
    ) -> Claim | NoClaim:
        account_id = _checks.account(account_id)
        now_ms, lease_ms = _checks.instant(now), _checks.lease(lease)
        concurrency, per_second, per_minute = _checks.limits(limits)
        claim_token = secrets.token_hex(16)
        reply = self._call(
            "claim", account_id, now_ms, lease_ms, concurrency, per_second, per_minute, claim_token
        )
        if "refused" in reply:
            wait = reply.get("retry_after")
            after = None if wait is None else timedelta(milliseconds=int(wait))
            return NoClaim(Refusal(reply["refused"]), after)
        return Claim(
            account_id,
            str(reply["upstream"]),
            claim_token,
            from_ms(int(reply["lease_ends"])),
            bool(reply["requested"]),
        )

    def renew(self, now: datetime, claim: Claim, lease: timedelta) -> Claim:
        account_id, upstream_id, claim_token = _checks.claim(claim)
        now_ms, lease_ms = _checks.instant(now), _checks.lease(lease)
        ends = self._call("renew", account_id, upstream_id, claim_token, now_ms, lease_ms)
        return Claim(account_id, upstream_id, claim_token, from_ms(int(ends)), claim.requested)

    def take_call(self, now: datetime, claim: Claim, limits: AccountLimits) -> timedelta | None:
        account_id, upstream_id, claim_token = _checks.claim(claim)
        now_ms = _checks.instant(now)
        _, per_second, per_minute = _checks.limits(limits)
        reply = self._call(
            "take_call", account_id, upstream_id, claim_token, now_ms, per_second, per_minute
        )
        wait = reply.get("retry_after")
        return None if wait is None else timedelta(milliseconds=int(wait))

    def take_proxies(self, now: datetime, claim: Claim, limits: AccountLimits, wanted: int) -> int:
        account_id, upstream_id, claim_token = _checks.claim(claim)
        now_ms, asked = _checks.instant(now), _checks.wanted(wanted)
        most = _checks.proxies_limit(limits)
        granted = self._call(
            "take_proxies",
            account_id,
            upstream_id,
            claim_token,
            now_ms,
            most,
            asked,
            MAX_GRANTS_PER_MINUTE,
        )
        return int(granted)

    def give_back_proxies(
        self, now: datetime, claim: Claim, count: int, taken_at: datetime
    ) -> None:
        account_id, upstream_id, claim_token = _checks.claim(claim)
        now_ms, returned = _checks.instant(now), _checks.wanted(count)
        taken_ms = min(_checks.instant(taken_at, "taken_at"), now_ms)
        self._call(
            "give_back_proxies", account_id, upstream_id, claim_token, now_ms, returned, taken_ms
        )

    def finish(self, now: datetime, claim: Claim, next_due_at: datetime) -> None:
        account_id, upstream_id, claim_token = _checks.claim(claim)
        now_ms, next_due = _checks.instant(now), _checks.due(next_due_at, "next_due_at")
        self._call("finish", account_id, upstream_id, claim_token, now_ms, next_due)

    def request(
        self, now: datetime, account_id: str, upstream_id: str, cooldown: timedelta
    ) -> RequestOutcome:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        now_ms, cooldown_ms = _checks.instant(now), _checks.cooldown(cooldown)
        return RequestOutcome(self._call("request", account_id, upstream_id, now_ms, cooldown_ms))

    def status(self, now: datetime, account_id: str, upstream_id: str) -> FetchStatus:
        account_id, upstream_id = _checks.ids(account_id, upstream_id)
        now_ms = _checks.instant(now)
        reply = self._call("status", account_id, upstream_id, now_ms, MAX_GRANTS_PER_MINUTE)

        def at(name: str) -> datetime | None:
            value = reply.get(name)
            return None if value is None else from_ms(int(value))

        return FetchStatus(
            due_at=at("due"),
            running_until=at("running"),
            requested_at=at("requested"),
            calls_last_minute=int(reply["calls"]),
            proxies_last_minute=max(0, int(reply["proxies"])),
        )

    def _call(self, name: str, account_id: str, *args: object) -> Any:
        # ARGV[1] of every operation: the account's key digest (its keys' names, lib.lua).
        return self._scripts.call(name, digest(account_id), *args)
