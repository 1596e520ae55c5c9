"""Tick leases: one holder at a time for a periodic job that every worker may be asked to run
(the ownership manager's tick: two managers topping up one deficit would over-assign).

A lease is a name, a holder and an expiry on the caller's clock, as the fetch scheduler's claims
are. ``acquire`` takes it unless another holder has it; ``renew`` extends it only while the
same holder still has it (False: lost, stop before the next step); ``release`` gives it up. A
holder that crashes loses it at its expiry. Like the pool: a port (``TickLease``), a reference
model (``MemoryTickLease``), a Redis implementation (``activity.tick_lease.redis``, lua/lease/)
and one contract (``activity.tick_lease.contract``) run against both.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from activity._checks import aware_ms, duration_ms, token

#: Longest lease: a tick that needs longer renews.
MAX_LEASE_TTL = timedelta(hours=1)


class TickLease(Protocol):
    def acquire(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Take the lease until ``now + ttl`` unless another holder has it (its own holder
        renews it); True when ``holder`` has it now."""
        ...

    def renew(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Extend it to ``now + ttl`` while ``holder`` still has it; False when lost (it ended,
        or another holder took it): the holder must stop."""
        ...

    def release(self, name: str, holder: str, now: datetime) -> bool:
        """Give it up if ``holder`` has it; False when it did not."""
        ...

    def holder(self, name: str, now: datetime) -> str | None:
        """Who holds it now, or None."""
        ...


_MAX_TTL_MS = int(MAX_LEASE_TTL.total_seconds() * 1000)


def checked(
    name: object, holder: object | None, now: object, ttl: object | None = None
) -> tuple[str, str, int, int]:
    """The arguments in the stores' form: (name, holder or "", now ms, ttl ms or 0);
    InvalidRequest for anything else."""
    ttl_ms = 0 if ttl is None else duration_ms(ttl, "ttl", minimum=1, maximum=_MAX_TTL_MS)
    held_by = "" if holder is None else token(holder, "holder")
    return token(name, "name"), held_by, aware_ms(now, "now"), ttl_ms


class MemoryTickLease:
    """The reference model: a dict, under the caller's clock."""

    def __init__(self) -> None:
        self._leases: dict[str, tuple[str, int]] = {}

    def _current(self, name: str, now_ms: int) -> str | None:
        lease = self._leases.get(name)
        if lease is None or lease[1] <= now_ms:
            return None
        return lease[0]

    def acquire(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        name, holder, now_ms, ttl_ms = checked(name, holder, now, ttl)
        current = self._current(name, now_ms)
        if current is not None and current != holder:
            return False
        self._leases[name] = (holder, now_ms + ttl_ms)
        return True

    def renew(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        name, holder, now_ms, ttl_ms = checked(name, holder, now, ttl)
        if self._current(name, now_ms) != holder:
            return False
        self._leases[name] = (holder, now_ms + ttl_ms)
        return True

    def release(self, name: str, holder: str, now: datetime) -> bool:
        name, holder, now_ms, _ = checked(name, holder, now)
        if self._current(name, now_ms) != holder:
            return False
        del self._leases[name]
        return True

    def holder(self, name: str, now: datetime) -> str | None:
        name, _, now_ms, _ = checked(name, None, now)
        return self._current(name, now_ms)
