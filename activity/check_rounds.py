"""Health checks in rounds, each round's results applied as it ends: what a fetch's intake
checks and an idle proxy's recheck share (``activity.fetch_job``, ``activity.rechecking``).

A round probes up to ``concurrency`` proxies at once through themselves
(``activity.checker.check_all``, on uvloop: docs/PERFORMANCE.md) and applies what each check
found through the pool's ``apply_health``, only to a proxy still in the state it was checked in
when it is ``guarded`` (a slower checker's result must not undo what another check or a
client's report did meanwhile). A round takes at most its timeout: the configured one,
shortened for short-lived proxies to a share of the shortest remaining life in the round
(:func:`round_timeout`). A proxy that cannot be checked as stored (a SOCKS5 login over 255
bytes) is UNHEALTHY without a probe.

Bounds: ``concurrency`` connections at once (the checker's ``MAX_CONCURRENCY``), one round at a
time, at most ``HEALTH_BATCH`` updates per ``apply_health`` call; ``before_round`` runs before
each round (the fetch renews its claim there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from activity.checker import CheckTarget, ProxyEndpoint, health_of
from activity.checker.runner import check_all
from activity.clock import Clock
from activity.ports import HealthStore
from activity.types import HealthResult, HealthUpdate, ProxyState

#: Health updates per ``apply_health`` call (the pool's ``max_health_batch``).
HEALTH_BATCH = 1_000
#: A check takes at most this share of the shortest remaining life in its round, and never
#: less than MIN_ROUND_TIMEOUT seconds: a 30 s proxy gets 1.5 s, not the upstream's 5 s (a
#: check that costs a third of a proxy's life is not worth it).
LIFE_SHARE = 0.05
MIN_ROUND_TIMEOUT = 1.0


def round_timeout(configured: float, remaining_s: float) -> float:
    """A round's check timeout: the configured one, shortened for short-lived proxies."""
    return min(configured, max(MIN_ROUND_TIMEOUT, remaining_s * LIFE_SHARE))


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One proxy to check: the state it is in (what a failure means follows from it), where to
    probe it (None: it cannot be probed as stored), until when it lives, and whether the
    result applies only while it is still in ``state`` (``guarded``: a recheck, listed in a
    state another check may change meanwhile; an intake check of a proxy just taken in is
    not, since it entered FETCHED or, its exit suspected by clients, SUSPECT, and a passing
    check makes either AVAILABLE)."""

    proxy_id: str
    state: ProxyState
    endpoint: ProxyEndpoint | None
    lives_until: datetime
    guarded: bool = True


@dataclass
class CheckTally:
    """What rounds of checks did: proxies probed, the states their updates gave (UNHEALTHY
    for those that could not be probed), the measured latencies, the pool's answers."""

    checked: int = 0
    states: dict[str, int] = field(default_factory=dict)
    #: Sum of the checks' measured latencies (ms) and how many were measured.
    latency_ms: int = 0
    timed: int = 0
    health: HealthResult = field(default_factory=HealthResult)

    def add(self, other: CheckTally) -> None:
        """Count another tally in this one (a run of several calls)."""
        self.checked += other.checked
        for state, n in other.states.items():
            self.states[state] = self.states.get(state, 0) + n
        self.latency_ms += other.latency_ms
        self.timed += other.timed
        self.health += other.health

    def applied(self, pool: HealthStore, updates: Sequence[HealthUpdate]) -> None:
        """Apply ``updates`` in the pool's batches, each counted here once applied (so a
        failure half-way leaves a tally of what the pool has)."""
        for start in range(0, len(updates), HEALTH_BATCH):
            part = updates[start : start + HEALTH_BATCH]
            self.health += pool.apply_health(part)
            for update in part:
                self.states[update.state.value] = self.states.get(update.state.value, 0) + 1
                if update.latency_ms is not None:
                    self.latency_ms += update.latency_ms
                    self.timed += 1


def unusable(item: CheckItem, now: datetime) -> HealthUpdate:
    """The update of a proxy that cannot be probed as stored: UNHEALTHY, no probe."""
    expected = item.state if item.guarded else None
    return HealthUpdate(
        item.proxy_id, ProxyState.UNHEALTHY, now, None, "check_unusable", expected=expected
    )


def check_in_rounds(
    items: Sequence[CheckItem],
    *,
    pool: HealthStore,
    target: CheckTarget,
    timeout: float,
    concurrency: int,
    clock: Clock,
    tally: CheckTally,
    before_round: Callable[[], object] | None = None,
) -> CheckTally:
    """Check ``items`` in rounds of ``concurrency`` and apply each round as it ends, counting
    into ``tally`` (returned)."""
    now = clock.now()
    tally.applied(pool, [unusable(item, now) for item in items if item.endpoint is None])
    probed = [item for item in items if item.endpoint is not None]
    for start in range(0, len(probed), concurrency):
        if before_round is not None:
            before_round()
        batch = probed[start : start + concurrency]
        shortest = min(item.lives_until for item in batch) - clock.now()
        endpoints = [item.endpoint for item in batch if item.endpoint is not None]
        results = check_all(
            endpoints,
            target,
            concurrency=concurrency,
            timeout=round_timeout(timeout, shortest.total_seconds()),
        )
        now = clock.now()
        tally.applied(
            pool,
            [
                replace(
                    health_of(item.proxy_id, result, now, item.state),
                    expected=item.state if item.guarded else None,
                )
                for item, result in zip(batch, results, strict=True)
            ],
        )
        tally.checked += len(batch)
    return tally
