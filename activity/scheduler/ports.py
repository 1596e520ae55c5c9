"""The fetch scheduler's port: what the dispatcher and the fetch task call. ``MemoryScheduler``
and ``RedisScheduler`` implement it; ``activity.scheduler.contract`` proves they behave alike.

Every instant is the caller's (``now``), as the pool's ports take it, so the rules are the
same on both implementations to the millisecond.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from activity.scheduler.types import AccountLimits, Claim, FetchStatus, NoClaim, RequestOutcome


class FetchScheduler(Protocol):
    def schedule(self, account_id: str, upstream_id: str, due_at: datetime) -> bool:
        """Put the upstream in its account's cadence, due at ``due_at``; False (and nothing
        changed) when it is there already. A fetch of it still running keeps it from being due
        before that fetch's lease ends."""
        ...

    def forget(self, account_id: str, upstream_id: str) -> bool:
        """Take the upstream out of the cadence and of the requests; False when it was not
        there. A fetch of it still running goes on, and its finish schedules nothing."""
        ...

    def drop_account(self, account_id: str) -> None:
        """Everything the scheduler holds for the account (its provider account is deleted):
        its cadence, requests, running leases (their claims are lost) and call log."""
        ...

    def claim(
        self, now: datetime, account_id: str, limits: AccountLimits, lease: timedelta
    ) -> Claim | NoClaim:
        """The next fetch of the account to run, as a lease: a requested upstream first (in
        the order of the requests), else the upstream due longest (due at or before ``now``).
        First the fetches whose lease ended are given up (they are due again); then a claim
        needs a free place under ``limits.concurrency`` and room for one vendor API call in
        every window of ``limits``, and takes that call. Never the same upstream twice at once."""
        ...

    def renew(self, now: datetime, claim: Claim, lease: timedelta) -> Claim:
        """The claim with its lease ending ``lease`` from now; ``LeaseLost`` if it is not the
        upstream's current claim (its lease ended, or it finished)."""
        ...

    def take_call(self, now: datetime, claim: Claim, limits: AccountLimits) -> timedelta | None:
        """One more vendor API call for the claim's fetch (a next page): None when taken, else
        how long until one fits every window of ``limits`` (nothing taken); ``LeaseLost`` as
        for ``renew``."""
        ...

    def take_proxies(self, now: datetime, claim: Claim, limits: AccountLimits, wanted: int) -> int:
        """How many of ``wanted`` proxies the claim's fetch may ask its vendor for: all of them,
        or what is left of ``limits.proxies_per_minute`` over the last minute (a proxy taken
        at ``t`` counts while ``t > now - 60 s``); what it grants counts at once, asked for or
        not. ``LeaseLost`` as for ``renew``."""
        ...

    def give_back_proxies(
        self, now: datetime, claim: Claim, count: int, taken_at: datetime
    ) -> None:
        """Return ``count`` proxies of what ``take_proxies`` granted the claim's fetch at
        ``taken_at`` and it did not get (the vendor failed, or sent fewer): they count no more.
        Logged at ``taken_at``, so they leave the window with the grant they come from; nothing
        when that grant has left it already. The caller returns at most what it was granted;
        ``LeaseLost`` as for ``renew``."""
        ...

    def finish(self, now: datetime, claim: Claim, next_due_at: datetime) -> None:
        """The fetch is done: its place is free and the upstream is due at ``next_due_at``
        (or at once, if it was requested while the fetch ran); ``LeaseLost`` as for ``renew``,
        so a redelivered task whose claim was finished or lost changes nothing."""
        ...

    def status(self, now: datetime, account_id: str, upstream_id: str) -> FetchStatus:
        """The upstream's place in the scheduler and its account's budget used (a bounded read:
        one member of each queue, the last minute's calls counted, its grants, at most
        MAX_GRANTS_PER_MINUTE, summed)."""
        ...

    def request(
        self, now: datetime, account_id: str, upstream_id: str, cooldown: timedelta
    ) -> RequestOutcome:
        """Ask for a fetch of the upstream ahead of its cadence (on-demand refill). Requests
        within ``cooldown`` of the last accepted one are merged into it."""
        ...
