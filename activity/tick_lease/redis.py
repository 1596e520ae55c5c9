"""Tick leases in Redis: one function library (lua/lease/), each operation one atomic FCALL,
under ``<prefix>:{lease}:`` (the keys: lua/lease/lib.lua)."""

from __future__ import annotations

from datetime import datetime, timedelta

import redis

from activity._checks import token
from activity.lua_functions import LUA_DIR, FunctionLibrary, Scripts
from activity.tick_lease import checked

OPERATIONS = ("acquire", "renew", "release", "holder")
_WRAPPER = (
    "redis.register_function('{name}_{suffix}', function(KEYS, ARGV)\n"
    "  bind(KEYS[1], ARGV[1])\n"
    "  return (function()\n{body}\n  end)()\n"
    "end)\n"
)
LEASE_LIBRARY = FunctionLibrary.of_folder("pp_lease", LUA_DIR / "lease", OPERATIONS, _WRAPPER)


class RedisTickLease:
    """The leases under ``<prefix>:{lease}:`` on ``client``."""

    def __init__(self, client: redis.Redis, prefix: str = "pp") -> None:
        token(prefix, "prefix")
        self._scripts = Scripts(client, f"{prefix}:{{lease}}:meta", LEASE_LIBRARY)

    def acquire(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        name, holder, now_ms, ttl_ms = checked(name, holder, now, ttl)
        return bool(self._scripts.call("acquire", name, holder, now_ms, ttl_ms))

    def renew(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        name, holder, now_ms, ttl_ms = checked(name, holder, now, ttl)
        return bool(self._scripts.call("renew", name, holder, now_ms, ttl_ms))

    def release(self, name: str, holder: str, now: datetime) -> bool:
        name, holder, now_ms, _ = checked(name, holder, now)
        return bool(self._scripts.call("release", name, holder, now_ms))

    def holder(self, name: str, now: datetime) -> str | None:
        name, _, now_ms, _ = checked(name, None, now)
        return str(self._scripts.call("holder", name, now_ms)) or None
