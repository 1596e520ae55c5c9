"""Celery tasks: thin wrappers with explicit names; the logic is in plain functions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from celery import shared_task

logger = logging.getLogger(__name__)


def heartbeat(now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> str:
    """Log that the worker is alive and return the time as ISO 8601 UTC (nothing else)."""
    stamp = now().astimezone(UTC).isoformat()
    logger.info("heartbeat %s", stamp)
    return stamp


@shared_task(name="pool_admin.heartbeat")
def heartbeat_task() -> str:
    return heartbeat()


@shared_task(name="pool_admin.prune_quality")
def prune_quality_task() -> int:
    """Outcome aggregates older than QUALITY_RETENTION_DAYS, one bounded batch per run."""
    from django.conf import settings

    from pool_admin.config.quality import prune_quality

    deleted, more = prune_quality(timedelta(days=settings.QUALITY_RETENTION_DAYS))
    if deleted:
        logger.info("quality: %d old rows deleted%s", deleted, ", more remain" if more else "")
    return deleted
