"""Celery tasks: thin wrappers with explicit names; the logic is in plain functions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import shared_task

from activity.types import SweepResult

logger = logging.getLogger(__name__)
#: Records (sweep) and assignments (expire) one run handles at most; the next run goes on.
SWEEP_LIMIT = 1_000


def heartbeat(now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> str:
    """Log that the worker is alive and return the time as ISO 8601 UTC (nothing else)."""
    stamp = now().astimezone(UTC).isoformat()
    logger.info("heartbeat %s", stamp)
    return stamp


def sweep_pool(limit: int) -> SweepResult:
    """One bounded sweep; the records it reports removed at expiry (since the previous sweep,
    wherever they were cleaned) go to the usage stream, used or not, per upstream. Every
    sweep goes through here: a sweep takes that tally, and one not told is lost."""
    from pool_admin.bootstrap import get_pool
    from pool_admin.metrics.stream import emit_event

    result = get_pool().sweep(limit)
    for upstream, tally in result.tally.items():
        emit_event("expired", upstream=upstream, used=tally.used, unused=tally.unused)
    return result


@shared_task(name="pool_admin.heartbeat")
def heartbeat_task() -> str:
    return heartbeat()


@shared_task(name="pool_admin.keep_usage_bounded")
def keep_usage_bounded_task() -> int:
    """Roll the usage aggregates' old minutes up into hours and delete rows past their
    retention, in bounded batches for at most a minute; then closed alerts past theirs."""
    from django.conf import settings

    from pool_admin.metrics.retention import keep_bounded_within

    result = keep_bounded_within(
        timedelta(hours=settings.USAGE_ROLLUP_AFTER_HOURS),
        timedelta(days=settings.USAGE_RETENTION_DAYS),
    )
    if result.rolled_up or result.deleted:
        logger.info(
            "usage aggregates: %d minute rows rolled up, %d old rows deleted%s",
            result.rolled_up,
            result.deleted,
            ", more remain" if result.more else "",
        )
    from pool_admin.alerts import prune_closed

    closed = prune_closed(timedelta(days=settings.ALERT_RETENTION_DAYS))
    if closed:
        logger.info("alerts: %d closed alerts deleted", closed)
    return result.rolled_up + result.deleted


@shared_task(name="pool_admin.dispatch_fetches")
def dispatch_fetches_task() -> int:
    """Claim the fetches that are due (pool_admin/fetch_tasks.py) and send each to a worker."""
    from pool_admin.fetch_tasks import dispatch, now

    return dispatch(now(), lambda payload: fetch_upstream_task.delay(payload))


@shared_task(name="pool_admin.fetch_upstream")
def fetch_upstream_task(claim: dict[str, Any]) -> int:
    """One claimed fetch; the proxies it inserted."""
    from pool_admin.fetch_tasks import run_fetch

    report = run_fetch(claim)
    return report.reconcile.inserted if report else 0


@shared_task(name="pool_admin.dispatch_checks")
def dispatch_checks_task() -> int:
    """Send one recheck task per upstream whose proxies are probed (pool_admin/recheck_tasks.py);
    a task not started within the period is dropped (the next dispatch sends another)."""
    from django.conf import settings

    from pool_admin.recheck_tasks import dispatch_checks

    expires = settings.CHECK_DISPATCH_PERIOD.total_seconds()
    return dispatch_checks(lambda name: check_upstream_task.apply_async((name,), expires=expires))


@shared_task(name="pool_admin.check_upstream")
def check_upstream_task(upstream: str) -> int:
    """Recheck what is due of one upstream; the proxies probed."""
    from pool_admin.recheck_tasks import run_checks

    report = run_checks(upstream)
    return report.checks.checked if report else 0


@shared_task(name="pool_admin.sweep_pool")
def sweep_pool_task() -> int:
    """One bounded sweep of the pool (expired records, sessions, quarantines)."""
    result = sweep_pool(SWEEP_LIMIT)
    return result.expired


@shared_task(name="pool_admin.ownership_tick")
def ownership_tick_task() -> int:
    """One ownership manager tick (pool_admin/gateway_tasks.py); the proxies it assigned, or
    -1 when another worker's tick held the lease."""
    from pool_admin.gateway_tasks import run_ownership_tick

    report = run_ownership_tick()
    if report is None:
        return -1
    return sum(tally.assigned for tally in report.groups.values())


@shared_task(name="pool_admin.expire_ownership")
def expire_ownership_task() -> int:
    """Release gateway assignments whose lease ended, a bounded batch per run."""
    from pool_admin.bootstrap import get_pool

    return len(get_pool().expire(datetime.now(UTC), SWEEP_LIMIT))
