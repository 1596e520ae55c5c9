"""What the recheck tasks run: idle proxies checked again on their cadence, on beat
(``activity.rechecking`` is the recheck itself).

``dispatch_checks`` (beat, every ``settings.CHECK_DISPATCH_PERIOD``) sends one task per
enabled upstream of an enabled account (one that trusts its provider: only for its proxies that
never got a check or entered SUSPECT).
``run_checks`` (that task) takes what the pool says is due, a round of ``CHECK_CONCURRENCY``
at a time, probes it and applies the results, until nothing more is due or the period is
spent. The upstream's ``check_interval_s`` is the policy's floor: no proxy is checked again
sooner, and it is also how long a taken proxy is held from other checkers, which covers a
round's probes (``check_timeout_ms`` never exceeds it: the model validates that). Two runs of
one upstream at once (a slow run and the next dispatch's) take disjoint proxies.

Bounds: a dispatch reads each upstream once; a run takes at most ``MAX_ROUNDS`` rounds of
``CHECK_CONCURRENCY`` and starts no round after ``CHECK_DISPATCH_PERIOD``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings

from activity.checker import CheckTarget
from activity.clock import SystemClock
from activity.rechecking import RecheckReport, recheck
from activity.types import RecheckPolicy
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import Upstream
from pool_admin.fetch_tasks import CHECK_CONCURRENCY
from pool_admin.metrics.stream import emit_event

logger = logging.getLogger(__name__)

MAX_ROUNDS = 10


def checked_upstreams() -> list[str]:
    """The upstreams whose idle proxies are probed again, by name: every enabled one of an
    enabled account (a trusted provider's only for its unchecked and SUSPECT proxies)."""
    rows = Upstream.objects.filter(enabled=True, account__enabled=True)
    return list(rows.order_by("name").values_list("name", flat=True))


def dispatch_checks(enqueue: Callable[[str], object]) -> int:
    """One check task per checked upstream; how many were sent."""
    names = checked_upstreams()
    for name in names:
        enqueue(name)
    return len(names)


def policy_of(upstream: Upstream) -> RecheckPolicy:
    return RecheckPolicy(
        min_interval=timedelta(seconds=upstream.check_interval_s),
        lifetime_fraction=settings.RECHECK_LIFETIME_FRACTION,
        min_remaining=settings.RECHECK_MIN_REMAINING,
        # Trusting the provider: its AVAILABLE proxies are never probed; a proxy that entered
        # SUSPECT (clients found its exit failing) or never got its intake check still is.
        available=not upstream.trust_provider,
    )


def run_checks(upstream_name: str) -> RecheckReport | None:
    """Recheck what is due of one upstream; None when it is not (or no longer) checked."""
    upstream = (
        Upstream.objects.filter(name=upstream_name, enabled=True, account__enabled=True)
        .only("name", "check_url", "check_timeout_ms", "check_interval_s", "trust_provider")
        .first()
    )
    if upstream is None:
        return None
    pool, clock, policy = get_pool(), SystemClock(), policy_of(upstream)
    target = CheckTarget(upstream.check_url)
    started = time.monotonic()
    total = RecheckReport()
    for _ in range(MAX_ROUNDS):
        report = recheck(
            upstream.name,
            pool=pool,
            check=target,
            timeout=upstream.check_timeout_ms / 1000,
            concurrency=CHECK_CONCURRENCY,
            clock=clock,
            limit=CHECK_CONCURRENCY,
            policy=policy,
        )
        total.add(report)
        spent = time.monotonic() - started >= settings.CHECK_DISPATCH_PERIOD.total_seconds()
        if report.complete or not report.listed or spent:
            break
    if total.listed:
        checks = total.checks
        emit_event(
            "check",
            upstream=upstream.name,
            source="recheck",
            states=checks.states,
            latency_ms=checks.latency_ms,
            timed=checks.timed,
        )
        logger.info(
            "recheck %s: %d due, %d probed, states %s%s",
            upstream.name,
            total.listed,
            checks.checked,
            checks.states,
            "" if total.complete else ", more are due",
        )
    return total
