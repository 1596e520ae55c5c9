"""Celery tasks: thin wrappers with explicit names; the logic is in plain functions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

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
