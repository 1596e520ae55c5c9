"""Rechecks of an upstream's idle proxies on their cadence (docs/activity-pool.md, "Rechecks").

A proxy is checked once at intake (``activity.fetch_job``). One that lives long enough is checked
again while it waits in the pool: the pool lists those due under a ``RecheckPolicy`` (check
effort follows remaining lifetime; nothing with under two minutes left, nothing a client or a
gateway worker holds) and holds each listed proxy for ``min_interval``, so two checkers at once
never probe one proxy twice, and one that dies leaves its proxies due again. Each check's
result goes back through ``apply_health`` with the state the proxy was listed in: a failed
recheck of an AVAILABLE proxy makes it SUSPECT (a definite failure: UNHEALTHY), and a SUSPECT
one's second failure makes it UNHEALTHY, a pass AVAILABLE again.

Bounds: at most ``limit`` proxies per call (the pool's ``max_health_batch``), probed in rounds
of ``concurrency``, each round at most ``timeout`` long (shorter for a round of short-lived
proxies) and applied when it ends: the rounds a fetch's intake checks run too
(``activity.check_rounds``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from activity.check_rounds import CheckItem, CheckTally, check_in_rounds
from activity.checker import CheckTarget, ProxyEndpoint
from activity.clock import Clock
from activity.ports import HealthStore, RecheckQueue
from activity.types import DueCheck, RecheckPolicy


class RecheckingPool(RecheckQueue, HealthStore, Protocol):
    """What a recheck needs of the pool: what is due, and where results go."""


@dataclass
class RecheckReport:
    #: Proxies the pool listed as due.
    listed: int = 0
    #: False: more may be due than one call listed (call again).
    complete: bool = True
    checks: CheckTally = field(default_factory=CheckTally)

    def add(self, later: RecheckReport) -> None:
        """Count a later call's report in this one (a run of several rounds)."""
        self.listed += later.listed
        self.complete = later.complete
        self.checks.add(later.checks)


def recheck(
    upstream_id: str,
    *,
    pool: RecheckingPool,
    check: CheckTarget,
    timeout: float,
    concurrency: int,
    clock: Clock,
    limit: int,
    policy: RecheckPolicy | None = None,
    keep_alive: Callable[[], object] | None = None,
) -> RecheckReport:
    """List what is due, probe it, apply the results; ``keep_alive()`` runs before each round."""
    due = pool.take_due_checks(upstream_id, clock.now(), policy or RecheckPolicy(), limit)
    report = RecheckReport(listed=len(due.checks), complete=due.complete)
    # Applied only to a proxy still in the state it was listed in: a slower checker's result
    # computed from a state another check already changed must not win.
    items = [CheckItem(d.proxy_id, d.state, _endpoint(d), d.usable_until) for d in due.checks]
    check_in_rounds(
        items,
        pool=pool,
        target=check,
        timeout=timeout,
        concurrency=concurrency,
        clock=clock,
        tally=report.checks,
        before_round=keep_alive,
    )
    return report


def _endpoint(item: DueCheck) -> ProxyEndpoint | None:
    """Where to probe the proxy; None when it cannot be probed as stored (a SOCKS5 login over
    255 bytes)."""
    try:
        return ProxyEndpoint.of(item.host, item.port, item.protocol, item.username, item.password)
    except ValueError:
        return None
