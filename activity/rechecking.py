"""Rechecks of an upstream's idle proxies on their cadence (``../research/providers.md`` 5.2).

A proxy is checked once at intake (``activity.filling``). One that lives long enough is checked
again while it waits in the pool: the pool lists those due under a ``RecheckPolicy`` (check
effort follows remaining lifetime; nothing with under two minutes left, nothing a client or a
gateway worker holds) and holds each listed proxy for ``min_interval``, so two checkers at once
never probe one proxy twice, and one that dies leaves its proxies due again. Each check's
result goes back through ``apply_health`` with the state the proxy was listed in: a failed
recheck of an AVAILABLE proxy makes it SUSPECT (a definite failure: UNHEALTHY), and a SUSPECT
one's second failure makes it UNHEALTHY, a pass AVAILABLE again.

Bounds: at most ``limit`` proxies per call (the pool's ``max_health_batch``), probed in rounds
of ``concurrency``, each round at most ``timeout`` long and applied when it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from activity.checker import CheckTarget, ProxyEndpoint, health_of, probe_all
from activity.clock import Clock
from activity.types import (
    DueCheck,
    DueChecks,
    HealthResult,
    HealthUpdate,
    ProxyState,
    RecheckPolicy,
)


class RecheckingPool(Protocol):
    def take_due_checks(
        self, upstream_id: str, now: datetime, policy: RecheckPolicy, limit: int
    ) -> DueChecks: ...

    def apply_health(self, updates: list[HealthUpdate]) -> HealthResult: ...


@dataclass
class RecheckReport:
    #: Proxies the pool listed as due.
    listed: int = 0
    #: Of those, probed (the rest could not be: UNHEALTHY).
    checked: int = 0
    #: Proxies by the state their recheck gave.
    states: dict[str, int] = field(default_factory=dict)
    health: HealthResult = field(default_factory=HealthResult)
    #: False: more may be due than one call listed (call again).
    complete: bool = True
    #: Sum of the probes' measured latencies (ms) and how many were measured.
    latency_ms: int = 0
    timed: int = 0

    def add(self, later: RecheckReport) -> None:
        """Count a later call's report in this one (a run of several rounds)."""
        self.listed += later.listed
        self.checked += later.checked
        for state, n in later.states.items():
            self.states[state] = self.states.get(state, 0) + n
        self.health += later.health
        self.complete = later.complete
        self.latency_ms += later.latency_ms
        self.timed += later.timed


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
    probable: list[tuple[DueCheck, ProxyEndpoint]] = []
    unusable: list[HealthUpdate] = []
    for item in due.checks:
        endpoint = _endpoint(item)
        if endpoint is None:
            unusable.append(HealthUpdate(item.proxy_id, ProxyState.UNHEALTHY, clock.now(), None,
                                         "check_unusable", expected=item.state))  # fmt: skip
        else:
            probable.append((item, endpoint))
    _apply(pool, unusable, report)
    for start in range(0, len(probable), concurrency):
        if keep_alive is not None:
            keep_alive()
        batch = probable[start : start + concurrency]
        results = asyncio.run(probe_all([endpoint for _, endpoint in batch], check,
                                        concurrency=concurrency, timeout=timeout))  # fmt: skip
        now = clock.now()
        # Applied only to a proxy still in the state it was listed in: a slower checker's
        # result computed from a state another check already changed must not win.
        updates = [
            replace(health_of(item.proxy_id, result, now, item.state), expected=item.state)
            for (item, _), result in zip(batch, results, strict=True)
        ]
        report.checked += len(updates)
        _apply(pool, updates, report)
    return report


def _endpoint(item: DueCheck) -> ProxyEndpoint | None:
    """Where to probe the proxy; None when it cannot be probed as stored (a SOCKS5 login over
    255 bytes)."""
    try:
        return ProxyEndpoint.of(item.host, item.port, item.protocol, item.username, item.password)
    except ValueError:
        return None


def _apply(pool: RecheckingPool, updates: list[HealthUpdate], report: RecheckReport) -> None:
    if not updates:
        return
    report.health += pool.apply_health(updates)  # at most limit <= max_health_batch updates
    for update in updates:
        report.states[update.state.value] = report.states.get(update.state.value, 0) + 1
        if update.latency_ms is not None:
            report.latency_ms += update.latency_ms
            report.timed += 1
