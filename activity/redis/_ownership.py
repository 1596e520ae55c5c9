"""RedisPool's ownership family: leases of proxies to gateway workers and their drain (port
OwnershipRepository).

The pool delegates these calls here (activity/redis/__init__.py); the Lua is assign.lua,
renew.lua, begin_drain.lua, acknowledge_drain.lua and expire.lua with
lua/lib/ownership_drain.lua.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from activity import _validation as v
from activity.lua_functions import Scripts
from activity.redis._codec import as_list, assignment
from activity.redis._workers import lease_ms
from activity.types import Assignment, DrainStatus, PoolOptions


class OwnershipCalls:
    """The ownership port of one namespace (``ns``), on the pool's scripts; ``now`` is the
    pool's clock in ms (assign cleans expired records by it)."""

    def __init__(
        self, scripts: Scripts, options: PoolOptions, ns: str, now: Callable[[], int]
    ) -> None:
        self._scripts = scripts
        self.options = options
        self._owners = ns + "owners"
        self._now = now

    def _owner_args(self, proxy_id: str, worker_id: str, epoch: int) -> None:
        v.text(proxy_id, "proxy_id", self.options)
        v.text(worker_id, "worker_id", self.options)
        v.epoch(epoch)

    def assign(self, now: datetime, proxy_id: str, worker_id: str, ttl: timedelta) -> Assignment:
        now_ms = v.aware_ms(now, "now")
        v.text(proxy_id, "proxy_id", self.options)
        v.text(worker_id, "worker_id", self.options)
        ttl_ms = lease_ms(ttl, self.options)
        reply = self._scripts.call(
            "assign", now_ms, proxy_id, worker_id, ttl_ms, self.options.clean_budget, self._now()
        )
        return assignment(reply)

    def renew(
        self, now: datetime, proxy_id: str, worker_id: str, epoch: int, ttl: timedelta
    ) -> Assignment:
        now_ms = v.aware_ms(now, "now")
        ttl_ms = lease_ms(ttl, self.options)
        self._owner_args(proxy_id, worker_id, epoch)
        return assignment(self._scripts.call("renew", now_ms, proxy_id, worker_id, epoch, ttl_ms))

    def begin_drain(self, proxy_id: str, worker_id: str, epoch: int) -> Assignment:
        self._owner_args(proxy_id, worker_id, epoch)
        return assignment(self._scripts.call("begin_drain", proxy_id, worker_id, epoch))

    def acknowledge_drain(
        self, proxy_id: str, worker_id: str, epoch: int, active: int, reserved: int
    ) -> DrainStatus:
        v.count(active, "active", low=0, high=2**31)
        v.count(reserved, "reserved", low=0, high=2**31)
        self._owner_args(proxy_id, worker_id, epoch)
        reply = self._scripts.call(
            "acknowledge_drain", proxy_id, worker_id, epoch, active, reserved
        )
        return DrainStatus(reply)

    def get(self, proxy_id: str) -> Assignment | None:
        v.text(proxy_id, "proxy_id", self.options)
        raw = self._scripts.hget_json(self._owners, proxy_id)
        return None if raw is None else assignment({"id": proxy_id, **raw})

    def expire(self, now: datetime, limit: int) -> list[Assignment]:
        now_ms = v.aware_ms(now, "now")
        n = v.limit(limit, self.options)
        return [assignment(a) for a in as_list(self._scripts.call("expire", now_ms, n))]
