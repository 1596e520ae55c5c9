"""What the console reads of the pool (port ``PoolInspector``): bounded pages of its proxies,
in the order of their hard expiry, filtered, with a cursor; and one proxy whole.

A page is read from the expiry index (the whole pool's, or one upstream's when the query names
it): at most ``budget`` index entries are examined per call, so a rare filter over a large pool
answers a short or empty page marked ``partial``, with a cursor to go on from, never an
unbounded scan (invariant 4). Nothing here holds a password: a proxy's login shows as a hint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from activity._checks import MAX_MS
from activity.errors import InvalidRequest
from activity.types import Assignment, ProxyState, RuntimeView, WorkerSession

#: Most proxies one page holds.
MAX_PAGE = 200
#: Most index entries one page examines, at most (``PoolOptions.scan_budget`` caps it too).
MAX_BUDGET = 10_000
_CURSOR = re.compile(r"(\d{1,14})\.(\S{1,256})")


@dataclass(frozen=True, slots=True)
class BrowseCursor:
    """Where a page ended: the next page starts after this (hard expiry ms, proxy ID)."""

    expires_ms: int
    proxy_id: str

    def token(self) -> str:
        """A URL-safe text form (``parse`` reads it back)."""
        return f"{self.expires_ms}.{self.proxy_id}"

    @classmethod
    def parse(cls, text: str) -> BrowseCursor:
        match = _CURSOR.fullmatch(text or "")
        if not match or int(match.group(1)) > MAX_MS:
            raise InvalidRequest("not a page cursor")
        return cls(int(match.group(1)), match.group(2))


@dataclass(frozen=True, slots=True)
class BrowseQuery:
    upstream: str | None = None
    state: ProxyState | None = None
    protocol: str | None = None
    region: str | None = None
    carrier: str | None = None
    after: BrowseCursor | None = None
    limit: int = 50
    #: Index entries examined at most (None: ``PoolOptions.scan_budget``, at most MAX_BUDGET).
    budget: int | None = None


@dataclass(frozen=True, slots=True)
class ProxySummary:
    proxy_id: str
    upstream_id: str
    #: As the pool counts it: DRAINING for a proxy whose worker is draining it.
    state: ProxyState
    protocol: str
    region: str | None
    carrier: str | None
    host: str
    port: int
    expires_at: datetime
    usable_until: datetime
    fetched_at: datetime
    checked_at: datetime | None
    #: The API client that extracted it, or None.
    extracted_by: str | None
    #: The gateway worker it is assigned to, or None.
    worker_id: str | None
    #: The login's first characters and a mask ("us***"), or None: never the password.
    username_hint: str | None


@dataclass(frozen=True, slots=True)
class BrowsePage:
    proxies: tuple[ProxySummary, ...]
    #: Where the next page starts; None: the index has no more entries.
    next: BrowseCursor | None
    #: Index entries this page examined.
    examined: int
    #: The budget ran out before the page was full: more may match further on (``next``).
    partial: bool


@dataclass(frozen=True, slots=True)
class ProxyDetail:
    summary: ProxySummary
    max_concurrency: int
    labels: Mapping[str, str] = field(default_factory=dict)
    last_success_at: datetime | None = None
    latency_ms: int | None = None
    failure_reason: str | None = None
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """A live worker session as the console shows it: the session (its issued and ACKed
    snapshots), its runtime report while fresh (this session's, not expired), and how many
    proxies the worker holds and drains."""

    session: WorkerSession
    runtime: RuntimeView | None
    assigned: int
    draining: int


@dataclass(frozen=True, slots=True)
class LiveWorkers:
    """Live sessions, the soonest to expire first; ``complete`` False when more were live
    than the limit."""

    workers: tuple[WorkerStatus, ...]
    complete: bool


def username_hint(username: str | None) -> str | None:
    """Enough of a login to tell two apart, never the whole of it."""
    if not username:
        return None
    return f"{username[:2]}***"
