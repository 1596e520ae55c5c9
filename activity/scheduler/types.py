"""What the fetch scheduler's port takes and answers (seed 001, adapted: per-account leases).

An upstream (a vendor's order or product) is fetched on a cadence; several upstreams share one
provider account and so its API limits. Per account the scheduler holds: the upstreams'
due times (the cadence), the upstreams requested ahead of it (priority), the fetches running
(a lease each, with its claim token), and the account's recent vendor API calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

#: Fetches one account may run at once, at most.
MAX_CONCURRENCY = 64
#: Vendor API calls per second and per minute an account may be given, at most. The calls of
#: the last minute are kept one by one (an exact sliding window), so these bound that log.
MAX_CALLS_PER_SECOND = 100
MAX_CALLS_PER_MINUTE = 6_000
#: Proxies per minute an account may be given, and asked for in one take, at most.
MAX_PROXIES_PER_MINUTE = 10_000_000
MAX_PROXIES_PER_TAKE = 1_000_000
#: Grants of proxies one account's log keeps for a minute; a take past it is granted nothing
#: (a fetch takes once, and an account makes at most MAX_CALLS_PER_MINUTE fetches a minute).
MAX_GRANTS_PER_MINUTE = 6_000
#: Longest lease a claim or renewal may ask for: a fetch that holds one longer is stuck.
MAX_LEASE = timedelta(minutes=30)
#: Longest cooldown between two accepted requests of one upstream.
MAX_COOLDOWN = timedelta(hours=1)
#: Upstreams one account may have scheduled (a claim reads the first member of each queue only:
#: a running upstream is never due in either, see claim.lua).
MAX_UPSTREAMS_PER_ACCOUNT = 10_000


@dataclass(frozen=True)
class AccountLimits:
    """One provider account's limits, as configured: fetches at once, vendor API calls in any
    window of one second and of one minute, and proxies in any window of one minute (None: no
    such limit)."""

    concurrency: int = 1
    calls_per_second: int | None = None
    calls_per_minute: int | None = None
    #: Proxies its fetches may take in any window of one minute (None: no limit).
    proxies_per_minute: int | None = None


@dataclass(frozen=True)
class Claim:
    """The right to fetch ``upstream_id`` until ``lease_expires_at`` (unless renewed); the
    ``token`` proves it to renew, take_call and finish. ``requested``: claimed for a request
    (priority), not for the cadence."""

    account_id: str
    upstream_id: str
    token: str
    lease_expires_at: datetime
    requested: bool


class Refusal(StrEnum):
    """Why a claim found nothing to run."""

    NOTHING_DUE = "nothing_due"  # no upstream is due (or every due one is running)
    CONCURRENCY = "concurrency"  # the account runs as many fetches as it may
    CALLS = "calls"  # a vendor API call now would go over the account's budget


@dataclass(frozen=True)
class NoClaim:
    """No fetch to run now; ``retry_after``: when one could be, if the scheduler knows (the
    next due time, the first lease to end, the first call to leave the window)."""

    reason: Refusal
    retry_after: timedelta | None


@dataclass(frozen=True)
class FetchStatus:
    """What the scheduler holds of one upstream and its account at ``now`` (the console's read;
    it changes nothing): when it is due (None: not scheduled), until when its fetch runs (None:
    none running), since when it is requested ahead of the cadence, and the account's vendor
    API calls and proxies granted in the last minute (a grant at t counts while t > now - 60 s,
    give-backs deducted)."""

    due_at: datetime | None
    running_until: datetime | None
    requested_at: datetime | None
    calls_last_minute: int
    proxies_last_minute: int


class RequestOutcome(StrEnum):
    #: The upstream is fetched ahead of the cadence (or right after the fetch running now).
    ACCEPTED = "accepted"
    MERGED = "merged"  # within the cooldown of the last accepted request: nothing changed
    UNKNOWN = "unknown"  # the upstream is not scheduled: nothing changed
